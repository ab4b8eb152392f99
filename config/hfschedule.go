package config

import (
	"fmt"
	"slices"
	"strings"
)

// Hugging Face's Trainer, given a DeepSpeed config without a scheduler block, builds its own schedule:
// transformers' get_scheduler(lr_scheduler_type, num_warmup_steps, num_training_steps), with the warmup
// from TrainingArguments.get_warmup_steps. Overrides.LRScheduler asks for the same here.

// HFSchedulerNames are the lr_scheduler_type values gotrain implements, as transformers names them.
func HFSchedulerNames() []string {
	return []string{"linear", "cosine", "constant_with_warmup", "constant"}
}

// hfSchedulersNotImplemented are transformers' other lr_scheduler_type values, named in the error.
func hfSchedulersNotImplemented() []string {
	return []string{"cosine_with_restarts", "polynomial", "inverse_sqrt", "reduce_lr_on_plateau",
		"cosine_with_min_lr", "cosine_warmup_with_min_lr", "warmup_stable_decay"}
}

// hfSchedule builds the schedule Overrides.LRScheduler asks for, recording its values as resolved keys (so
// ranks and resumes compare them) and a note saying what it does; a file with its own scheduler block is an
// error, since Hugging Face's Trainer would use the block and the flag would mean nothing.
func (d *decoder) hfSchedule() {
	ov := d.opts.Overrides
	name := ov.LRScheduler
	if name == "" {
		return
	}
	if !slices.Contains(HFSchedulerNames(), name) {
		msg := fmt.Sprintf("lr_scheduler_type %q is not one gotrain implements", name)
		if !slices.Contains(hfSchedulersNotImplemented(), name) {
			msg = fmt.Sprintf("lr_scheduler_type %q is not a Hugging Face schedule", name)
			if s := suggest(name, HFSchedulerNames()); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", s)
			}
		}
		d.errAt(0, 0, "", msg, "pass one of "+strings.Join(HFSchedulerNames(), ", ")+", or write a DeepSpeed scheduler block")
		return
	}
	if e := d.ents["scheduler"]; e != nil && e.given {
		typ := "no type"
		if t, ok := d.ents["scheduler.type"]; ok {
			typ = formatValue(t.v)
		}
		d.errAt(e.line, e.col, "scheduler",
			fmt.Sprintf("the file's scheduler block (%s) sets the schedule, so --lr-scheduler-type %s would have no effect (Hugging Face's Trainer also uses the DeepSpeed config's scheduler when it has one)", typ, name),
			"drop --lr-scheduler-type, or remove the scheduler block to train with Hugging Face's "+name+" schedule")
		return
	}
	warmup, wnote, _ := ov.warmupSteps()
	if wnote == "" {
		wnote = fmt.Sprintf("Hugging Face default warmup_steps=%d", hfDefaultWarmupSteps)
	}
	total, tsrc := DefaultMaxSteps, Source{Kind: FromRunTime, Note: runLength()}
	if v, ok := ov.TotalSteps.Get(); ok {
		total, tsrc = v, Source{Kind: FromRun, Note: "total training steps"}
	}
	if name == "constant" {
		warmup, wnote = 0, "constant has no warmup (get_scheduler passes it none)"
	}
	const p = "scheduler.params."
	d.put("scheduler.type", name, Source{Kind: FromRun, Note: "--lr-scheduler-type; the file has no scheduler block"}, nil, hfNone)
	d.put(p+"warmup_num_steps", int64(warmup), Source{Kind: FromRun, Note: wnote}, nil, hfNone)
	d.put(p+"total_num_steps", int64(total), tsrc, nil, hfNone)
	d.hfSched = &Scheduler{Type: name, HF: true, Supported: true, Raw: map[string]any{},
		Params: SchedulerParams{WarmupNumSteps: warmup, TotalNumSteps: total, LastBatchIteration: -1}}
	d.warns = append(d.warns, Warning{File: d.file, Path: "scheduler", Note: true,
		Msg: fmt.Sprintf("the config has no scheduler block; --lr-scheduler-type %s fills one as Hugging Face's Trainer does: %s",
			name, hfScheduleWords(name, warmup, total))})
}

// hfScheduleWords describes a Hugging Face schedule in a sentence.
func hfScheduleWords(name string, warmup, total int) string {
	rise := fmt.Sprintf("the learning rate rises linearly from 0 to lr over %d warmup steps, then ", warmup)
	if warmup == 0 {
		rise = "no warmup; the learning rate "
	}
	switch name {
	case "linear":
		return rise + fmt.Sprintf("decays linearly to 0 at step %d", total)
	case "cosine":
		return rise + fmt.Sprintf("follows a half cosine down to 0 at step %d", total)
	case "constant_with_warmup":
		return rise + "stays at lr"
	}
	return "the learning rate stays at lr"
}
