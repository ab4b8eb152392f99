package nccl

import "fmt"

// Version is an NCCL release.
type Version struct{ Major, Minor, Patch int }

// DecodeVersion decodes ncclGetVersion's number, which NCCL encodes two
// ways (its NCCL_VERSION macro): major*1000 + minor*100 + patch up to 2.8
// (2708 for 2.7.8), and major*10000 + minor*100 + patch from 2.9 on (21903
// for 2.19.3). The old encoding never reaches 10000 and the new one never
// goes below it, so the size of the number tells them apart.
func DecodeVersion(code int) Version {
	if code >= 10000 {
		return Version{Major: code / 10000, Minor: code / 100 % 100, Patch: code % 100}
	}
	return Version{Major: code / 1000, Minor: code / 100 % 10, Patch: code % 100}
}

// AtLeast reports whether v is major.minor.patch or newer.
func (v Version) AtLeast(major, minor, patch int) bool {
	if v.Major != major {
		return v.Major > major
	}
	if v.Minor != minor {
		return v.Minor > minor
	}
	return v.Patch >= patch
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }
