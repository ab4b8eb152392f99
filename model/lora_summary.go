package model

import (
	"fmt"
	"strings"
)

// DefaultLoRAAlpha is lora_alpha when a configuration gives none: PEFT's
// LoraConfig default (lora_alpha: int = 8), so an adapter made with a rank
// alone scales as LoraConfig(r=R) scales it, by 8/R.
const DefaultLoRAAlpha = 8.0

// String describes l as a run's start-up lines show it:
// "r 16, lora_alpha 8 (scale 0.5), target_modules all-linear, lora_dropout 0.05".
func (l LoRA) String() string {
	s := fmt.Sprintf("r %d, lora_alpha %g (scale %.4g", l.R, l.Alpha, l.Scale())
	if l.RSLoRA {
		s += ", rsLoRA"
	}
	return fmt.Sprintf("%s), target_modules %s, lora_dropout %g", s, strings.Join(l.Target, ","), l.Dropout)
}

// HFNumParams is cfg's parameter count as transformers counts a model's
// parameters (num_parameters(), PEFT's "all params" without adapters):
// every tensor under its Hugging Face shape, so GPT-2's embedding has its
// V rows, not the padded Vp, and a tied head is counted once.
func HFNumParams(cfg Config) int {
	n := 0
	for _, t := range NewLayout(cfg).Tensors() {
		n += elems(hfShape(cfg, t))
	}
	return n
}

// TrainableParamsLine is PEFT's print_trainable_parameters line for the
// adapters alay on their frozen base: the adapters train, and all params
// counts the base (HFNumParams) and the adapters, e.g.
// "trainable params: 81,920 || all params: 494,114,688 || trainable%: 0.0166".
func TrainableParamsLine(alay *AdapterLayout) string {
	trainable := alay.NumParams()
	all := HFNumParams(alay.Config()) + trainable
	return fmt.Sprintf("trainable params: %s || all params: %s || trainable%%: %.4f",
		groupThousands(trainable), groupThousands(all), 100*float64(trainable)/float64(all))
}

// groupThousands writes n as Python's format(n, ",d") does: 1,234,567.
func groupThousands(n int) string {
	if n < 0 {
		return "-" + groupThousands(-n)
	}
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
