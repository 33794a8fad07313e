package doctor

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a Python package version reduced to what matching needs:
// the release numbers, a pre-release tag and the local label. PEP 440
// allows more (epochs, dev and post releases); those parts are kept in
// Pre so that they show up in messages but never decide a match.
type Version struct {
	Major, Minor, Patch int
	Pre                 string // "a0", "rc1", ".post0", ".dev20230101" ...
	Local               string // "cpu", "xpu", "cxx11.abi" (after the +)
}

// VersionError is a version string that does not start with numbers.
type VersionError struct{ Value string }

func (e *VersionError) Error() string {
	return fmt.Sprintf("version %q does not start with MAJOR.MINOR", e.Value)
}

// ParseVersion reads "2.1.0a0+cxx11.abi", "1.13.0+cpu", "1.12.100",
// "2.1.10+xpu" or "1.13". A missing patch is 0.
func ParseVersion(s string) (Version, error) {
	var v Version
	rest := strings.TrimPrefix(strings.TrimSpace(s), "v")
	rest, v.Local, _ = strings.Cut(rest, "+")
	nums := [3]*int{&v.Major, &v.Minor, &v.Patch}
	for i := 0; i < 3; i++ {
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j == 0 {
			if i < 2 {
				return Version{}, &VersionError{s}
			}
			break
		}
		n, err := strconv.Atoi(rest[:j])
		if err != nil {
			return Version{}, &VersionError{s}
		}
		*nums[i] = n
		rest = rest[j:]
		if i < 2 {
			if !strings.HasPrefix(rest, ".") {
				if i == 0 {
					return Version{}, &VersionError{s}
				}
				break
			}
			if i == 1 && (len(rest) < 2 || rest[1] < '0' || rest[1] > '9') {
				break // "1.13.post0": the dot belongs to the suffix
			}
			rest = rest[1:]
		}
	}
	v.Pre = rest
	return v, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// sameMinor reports whether a and b are of one major.minor release line.
func sameMinor(a, b Version) bool { return a.Major == b.Major && a.Minor == b.Minor }

// Match is the verdict of comparing two versions.
type Match int

const (
	Matches Match = iota
	// Mismatch means the extension was built for another torch: it fails
	// at import ("Mismatch in kernel C++ signatures", undefined symbols).
	Mismatch
)

// bindingsTorchPatch are the oneccl_bind_pt releases whose patch does not
// follow the patch/100 rule: the 2.1.x00 series was built for torch
// v2.1.0 (the IPEX 2.1.x0+xpu stack), as the "PyTorch API Align" table of
// https://github.com/intel/torch-ccl (README) lists.
var bindingsTorchPatch = map[[3]int]int{
	{2, 1, 100}: 0, {2, 1, 200}: 0, {2, 1, 300}: 0, {2, 1, 400}: 0,
}

// BindingsTorch is the torch release a oneccl_bindings_for_pytorch (or
// torch_ccl) release was built for: the same major.minor, and the patch
// encodes torch's as patch/100 (1.12.0 for torch 1.12.0, 1.12.100 for
// torch 1.12.1, 2.0.100 for torch 2.0.1), except the series above.
func BindingsTorch(bind Version) Version {
	t := Version{Major: bind.Major, Minor: bind.Minor, Patch: bind.Patch / 100}
	if p, ok := bindingsTorchPatch[[3]int{bind.Major, bind.Minor, bind.Patch}]; ok {
		t.Patch = p
	}
	return t
}

// BindingsFor is the oneccl_bind_pt version to install for torch: the
// inverse of BindingsTorch's rule.
func BindingsFor(torch Version) string {
	return fmt.Sprintf("%d.%d.%d", torch.Major, torch.Minor, torch.Patch*100)
}

// MatchBindings compares torch with the oneCCL bindings and says which
// torch they were built for. Pre-releases and local labels are ignored:
// Debian's torch 1.13.0a0 is 1.13.0, the xpu stack's 2.1.0a0+cxx11.abi is
// 2.1.0.
func MatchBindings(torch, bind Version) (m Match, builtFor Version) {
	want := BindingsTorch(bind)
	if !sameMinor(torch, want) || torch.Patch != want.Patch {
		return Mismatch, want
	}
	return Matches, want
}

// MatchIPEX compares torch with intel_extension_for_pytorch: "For each
// PyTorch release, we have a corresponding release of the extension",
// torch v1.13.* with IPEX v1.13.*, v1.12.* with v1.12.* (installation
// guide, https://intel.github.io/intel-extension-for-pytorch/cpu/1.13.0+cpu/tutorials/installation.html).
// Only major.minor must agree: IPEX's patch is its own (2.1.10+xpu and
// 2.1.20+xpu are both for torch 2.1.0, 2.3.110+xpu for torch 2.3.1).
// Releases before 1.10 were named intel_pytorch_extension and are not
// probed.
func MatchIPEX(torch, ipex Version) Match {
	if !sameMinor(torch, ipex) {
		return Mismatch
	}
	return Matches
}
