package kernels

import "fmt"

// oldestCUDA13Arch is the oldest architecture NVRTC 13 compiles for:
// CUDA 13.0 dropped Maxwell, Pascal and Volta (sm_50 to sm_72), which
// NVRTC 12 still targets.
const oldestCUDA13Arch SM = 75

// nvrtcSoname is the soname of NVRTC for a CUDA major: 11.2 through 11.8
// share libnvrtc.so.11.2.
func nvrtcSoname(major int) string {
	if major == 11 {
		return "libnvrtc.so.11.2"
	}
	return fmt.Sprintf("libnvrtc.so.%d", major)
}

// tooOldHint says how to compile for a device older than anything the
// loaded NVRTC supports, when an older NVRTC release still can; "" when
// none can.
func tooOldHint(nvrtcMajor int, arch SM) string {
	if nvrtcMajor >= 13 && arch >= 50 && arch < oldestCUDA13Arch {
		return fmt.Sprintf("; CUDA 13 dropped %s (sm_50 to sm_72 are gone from NVRTC 13): "+
			"load an NVRTC 12 instead, e.g. %s=%s", arch, EnvNVRTC, nvrtcSoname(12))
	}
	return ""
}

// driverFloor is the oldest driver branch of each CUDA major.
var driverFloor = map[int]string{11: "R450", 12: "R525", 13: "R580"}

// newerThanDriverHint explains a module the driver refused when NVRTC is
// of a later CUDA major than the driver (cuDriverGetVersion's number): a
// driver's JIT reads no PTX ISA of a later major, so neither image can
// load. "" when the majors do not say so.
func newerThanDriverHint(nvrtcMajor, driverVersion int) string {
	driverMajor := driverVersion / 1000
	if driverVersion <= 0 || nvrtcMajor <= driverMajor {
		return ""
	}
	upgrade := ""
	if floor, ok := driverFloor[nvrtcMajor]; ok {
		upgrade = fmt.Sprintf(" or install a driver for CUDA %d (%s or newer)", nvrtcMajor, floor)
	}
	return fmt.Sprintf("; NVRTC %d is newer than the driver (CUDA %d.%d), which cannot load its output: "+
		"load an NVRTC %d (%s=%s)%s", nvrtcMajor, driverMajor, driverVersion%1000/10, driverMajor, EnvNVRTC,
		nvrtcSoname(driverMajor), upgrade)
}
