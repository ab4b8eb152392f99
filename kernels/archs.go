package kernels

import "fmt"

// oldestCUDA13Arch is the oldest architecture NVRTC 13 compiles for:
// CUDA 13.0 dropped Maxwell, Pascal and Volta (sm_50 to sm_72), which
// NVRTC 12 still targets.
const oldestCUDA13Arch SM = 75

// tooOldHint says how to compile for a device older than anything the
// loaded NVRTC supports, when an older NVRTC release still can; "" when
// none can.
func tooOldHint(nvrtcMajor int, arch SM) string {
	if nvrtcMajor >= 13 && arch >= 50 && arch < oldestCUDA13Arch {
		return fmt.Sprintf("; CUDA 13 dropped %s (sm_50 to sm_72 are gone from NVRTC 13): "+
			"load an NVRTC 12 instead, e.g. %s=libnvrtc.so.12", arch, EnvNVRTC)
	}
	return ""
}
