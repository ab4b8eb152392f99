package nccl

import "github.com/gotrain/gotrain/internal/libsearch"

// EnvLibrary names the NCCL file to load (a path or a soname). When set it
// is the only name tried: an override that fails must not quietly load
// another copy.
const EnvLibrary = "GOTRAIN_LIBNCCL"

// LoadOptions configures Load. The zero value is usable.
type LoadOptions struct {
	// Library, if set, is the only file tried, ahead of $GOTRAIN_LIBNCCL.
	Library string
	// Search finds the library where no override names one; nil searches
	// as libsearch.FromEnv(0) does.
	Search *libsearch.Searcher
}

// Spec is NCCL for libsearch. Its soname carries no CUDA major; NVIDIA's
// CUDA 12 wheel puts it in nvidia/nccl/lib, the CUDA 13 one in
// nvidia/cu13/lib.
func Spec() libsearch.Spec {
	return libsearch.Spec{Name: "NCCL", Env: EnvLibrary, Sonames: defaultNames(), Wheels: []string{"nccl/lib"}, Unversioned: true}
}

func (o LoadOptions) searcher() *libsearch.Searcher {
	if o.Search != nil {
		return o.Search
	}
	return libsearch.FromEnv(0)
}

// defaultNames: NCCL 2.x has always been libnccl.so.2.
func defaultNames() []string { return []string{"libnccl.so.2"} }

const installHint = "install NCCL (libnccl2 from the CUDA repository, or the nvidia/cuda runtime image; " +
	"PyTorch's wheels or pip's nvidia-nccl-cu12 are found in an active Python environment) or set " +
	EnvLibrary + " to its path"

func notAvailable(r libsearch.Result) error {
	return &libsearch.Error{Result: r, Sentinel: ErrNotAvailable, Hint: installHint}
}
