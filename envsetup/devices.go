package envsetup

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/envsetup/intelgpu"
	"github.com/batchkit/batchkit/topology"
)

// DeviceAffinity gives each local rank of the node at t its own Intel GPU
// or tile through ZE_AFFINITY_MASK, which Level Zero reads (and so SYCL,
// PyTorch's XPU backend and oneCCL on top of it): the mask lists the
// devices a process may see, which Level Zero numbers from 0 in its own
// order. The mask is the same in every local rank and lists one device per
// rank in rank order, so xpu:LOCAL_RANK is local rank LOCAL_RANK's device:
// a different one-device mask per rank would make oneCCL lose sight of its
// peers' devices (topo_manager.cpp: "comm_dev_uuids is not sub-vector of
// node_dev_uuids ... narrow device affinity mask") and fall back to slower
// paths. cards is intelgpu.Read's list; set holds at most ZE_AFFINITY_MASK,
// warnings one line each.
//
// Level Zero's numbering, which the mask is written in:
//
//   - Devices are the cards this process can open (a device cgroup hides
//     the others), discrete cards first and then by PCI address; with
//     ZE_ENABLE_PCI_ID_DEVICE_ORDER=1 by PCI address only (compute-runtime
//     ExecutionEnvironment::sortNeoDevices). Integrated graphics count in
//     this numbering but are never given to a rank.
//   - ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE: a device is a card, its tiles
//     sub-devices (a mask entry "c.t" would expose tiles of one card under
//     that card, not as devices of their own, so batchkit gives out cards).
//     FLAT (compute-runtime's default on Data Center GPU Max, whose cards
//     have 2 tiles) and COMBINED: every tile is a device of its own,
//     numbered across the cards in order
//     (ExecutionEnvironment::parseAffinityMask). Unset, batchkit assumes
//     FLAT when a card has more than one tile, COMPOSITE otherwise: the two
//     number single-tile cards alike.
//
// The rule, for n local ranks:
//
//   - No discrete Intel GPU this process can open: nothing, no warning.
//   - A ZE_AFFINITY_MASK that is not Slurm's (slurmBinding) is the user's:
//     kept, with one warning (naming its form if Level Zero would not read
//     it). So is an ONEAPI_DEVICE_SELECTOR that names devices by number
//     (the mask would renumber them; one naming only backends and types,
//     such as level_zero:gpu, filters by kind and is kept beside the mask),
//     and Intel MPI's own GPU pinning (I_MPI_OFFLOAD_PIN=1, or
//     I_MPI_OFFLOAD=1/2 with I_MPI_OFFLOAD_PIN unset), which a set
//     ZE_AFFINITY_MASK turns off.
//   - The candidates are the cards Slurm bound to the step or task when it
//     did, else every discrete card; their devices are cards (COMPOSITE) or
//     tiles (FLAT). A task Slurm bound to cards of its own (--gpus-per-task,
//     --gpu-bind; seen as fewer cards than SLURM_GPUS_ON_NODE) keeps all of
//     them, and so does the node's only rank; without a Slurm binding the
//     node's only rank gets no mask at all.
//   - n ranks on D >= n devices: local rank r's device is device r*D/n, in
//     order, so ranks spread over the cards (and their sockets) when there
//     are more devices than ranks.
//   - More ranks than devices: all of them, and a warning that ranks share
//     them (local rank r's is xpu:(r mod D)).
//   - Slurm's own ZE_AFFINITY_MASK numbers cards (its oneapi autodetection
//     enumerates in COMPOSITE): under FLAT with multi-tile cards its "1"
//     would be card 0's second tile, so it is rewritten in tiles.
//   - A mask equal to the one already set, or to every device Level Zero
//     shows when none is set, is not set.
func DeviceAffinity(t topology.Topology, cards []intelgpu.Card, getenv topology.Getenv) (set map[string]string, warnings []string) {
	visible := levelZeroOrder(cards, getenv)
	if !slices.ContainsFunc(visible, func(c intelgpu.Card) bool { return !c.Integrated }) {
		return nil, nil
	}
	mask := getenv("ZE_AFFINITY_MASK")
	b, bound := slurmBinding(getenv, len(visible))
	if mask != "" && !b.mask {
		return nil, []string{userMask(mask)}
	}
	if sel := getenv("ONEAPI_DEVICE_SELECTOR"); namesDevices(sel) {
		return nil, []string{fmt.Sprintf("devices: ONEAPI_DEVICE_SELECTOR=%q picks devices by number: ZE_AFFINITY_MASK not set (it would renumber them)", sel)}
	}
	if v, ok := intelMPIPins(getenv); ok {
		return nil, []string{fmt.Sprintf("devices: %s: Intel MPI pins GPUs itself, ZE_AFFINITY_MASK not set (it would turn that off)", v)}
	}
	mode, warnings := hierarchy(visible, getenv)

	n := max(t.LocalWorldSize, 1)
	var cand []int // indices into visible
	if bound {
		for _, c := range b.cards {
			if c >= len(visible) {
				return nil, append(warnings, fmt.Sprintf(
					"devices: Slurm bound device(s) %s, but this rank can open %d Intel GPU(s): ZE_AFFINITY_MASK left as it is", b.raw, len(visible)))
			}
		}
		cand = b.cards
		if b.own {
			n = 1
		}
	} else {
		if n == 1 {
			return nil, warnings
		}
		for i, c := range visible {
			if !c.Integrated {
				cand = append(cand, i)
			}
		}
	}

	flat := mode != "COMPOSITE"
	base := make([]int, len(visible)+1) // each card's first tile in FLAT numbering; the last, their count
	for i, c := range visible {
		base[i+1] = base[i] + c.Tiles
	}
	// The devices Level Zero will show: cards in COMPOSITE, tiles in FLAT.
	var units []string
	for _, i := range cand {
		if !flat {
			units = append(units, strconv.Itoa(i))
			continue
		}
		for tl := range visible[i].Tiles {
			units = append(units, strconv.Itoa(base[i]+tl))
		}
	}
	want := units // alone, or bound by Slurm alone: every candidate
	if n > 1 && n <= len(units) {
		want = nil
		for r := range n {
			want = append(want, units[r*len(units)/n])
		}
	} else if n > 1 {
		kind := "card"
		if flat && len(units) > len(cand) {
			kind = "tile"
		}
		w := fmt.Sprintf("devices: %d local ranks on %d Intel GPU %s(s): ranks share them (local rank r's is xpu:(r mod %d))", n, len(units), kind, len(units))
		if !flat && slices.ContainsFunc(cand, func(i int) bool { return visible[i].Tiles > 1 }) {
			w += "; ZE_FLAT_DEVICE_HIERARCHY=FLAT would give each rank a tile"
		}
		warnings = append(warnings, w)
	}
	all := len(visible)
	if flat {
		all = base[len(visible)]
	}
	got := strings.Join(want, ",")
	if got == mask || mask == "" && len(want) == all {
		return nil, warnings // nothing to change
	}
	return map[string]string{"ZE_AFFINITY_MASK": got}, warnings
}

// levelZeroOrder is the cards Level Zero can open, in its order.
func levelZeroOrder(cards []intelgpu.Card, getenv topology.Getenv) []intelgpu.Card {
	var out []intelgpu.Card
	for _, c := range cards {
		if c.Usable {
			out = append(out, c)
		}
	}
	pci := false
	if v, err := strconv.Atoi(strings.TrimSpace(getenv("ZE_ENABLE_PCI_ID_DEVICE_ORDER"))); err == nil && v != 0 {
		pci = true
	}
	slices.SortStableFunc(out, func(a, b intelgpu.Card) int {
		if !pci && a.Integrated != b.Integrated {
			if a.Integrated {
				return 1
			}
			return -1
		}
		return intelgpu.ComparePCI(a.PCI, b.PCI)
	})
	return out
}

// hierarchy is the Level Zero device hierarchy in effect: the user's
// ZE_FLAT_DEVICE_HIERARCHY, else FLAT when a card has several tiles
// (compute-runtime's default on the multi-tile Xe HPC cards), else
// COMPOSITE (the same numbering for single-tile cards).
func hierarchy(visible []intelgpu.Card, getenv topology.Getenv) (string, []string) {
	var warnings []string
	switch h := getenv("ZE_FLAT_DEVICE_HIERARCHY"); h {
	case "FLAT", "COMPOSITE", "COMBINED":
		return h, nil
	case "":
	default:
		warnings = append(warnings, fmt.Sprintf(
			"devices: ZE_FLAT_DEVICE_HIERARCHY=%q is not FLAT, COMPOSITE or COMBINED: Level Zero ignores it, ZE_AFFINITY_MASK is computed for its default", h))
	}
	if slices.ContainsFunc(visible, func(c intelgpu.Card) bool { return c.Tiles > 1 }) {
		return "FLAT", warnings
	}
	return "COMPOSITE", warnings
}

// binding is what Slurm bound to this step or task on this node.
type binding struct {
	cards []int  // indices into the cards this process can open
	raw   string // as Slurm said it, for messages
	mask  bool   // ZE_AFFINITY_MASK is Slurm's
	own   bool   // bound to this task alone
}

// slurmBinding reads the GPUs Slurm's gres/gpu plugin bound: it sets
// SLURM_STEP_GPUS (SLURM_JOB_GPUS in a batch script) to the global
// indices of the step's GPUs on this node, or only the task's when tasks
// are bound (--gpus-per-task, --gpu-bind), and ZE_AFFINITY_MASK (AutoDetect
// =oneapi, or no environment flags in gres.conf) and GPU_DEVICE_ORDINAL
// (opencl_env, also a default) to the same GPUs as the task's runtime numbers
// them: local indices from 0 when ConstrainDevices hides the others, else
// the global ones (src/plugins/gres/common/gres_common.c). So a
// ZE_AFFINITY_MASK is taken for Slurm's when SLURM_STEP_GPUS is set and
// the mask equals GPU_DEVICE_ORDINAL, or lists as many plain increasing
// indices as SLURM_STEP_GPUS has. Without a mask of Slurm's,
// GPU_DEVICE_ORDINAL's indices serve; without either, SLURM_STEP_GPUS's,
// as local indices when this process can open exactly that many cards
// (ConstrainDevices) and global ones otherwise.
//
// The binding is the task's own when it has fewer cards than
// SLURM_GPUS_ON_NODE (the step's count on the node); without that
// variable, when SLURM_GPUS_PER_TASK is set or there is exactly one card.
func slurmBinding(getenv topology.Getenv, visible int) (binding, bool) {
	raw := getenv("SLURM_STEP_GPUS")
	if raw == "" {
		raw = getenv("SLURM_JOB_GPUS")
	}
	global, ok := indexList(raw)
	if !ok {
		return binding{}, false
	}
	b := binding{raw: raw}
	z, ord := getenv("ZE_AFFINITY_MASK"), getenv("GPU_DEVICE_ORDINAL")
	if l, ok := indexList(z); ok && (z == ord || len(l) == len(global) && slices.IsSorted(l)) {
		b.cards, b.mask, b.raw = l, true, z
	} else if z != "" {
		return binding{}, false // the user's
	} else if l, ok := indexList(ord); ok && len(l) == len(global) {
		b.cards = l
	} else if visible == len(global) {
		for i := range global {
			b.cards = append(b.cards, i)
		}
	} else {
		b.cards = global
	}
	if on, err := strconv.Atoi(getenv("SLURM_GPUS_ON_NODE")); err == nil && on > 0 {
		b.own = len(b.cards) < on
	} else {
		b.own = getenv("SLURM_GPUS_PER_TASK") != "" || len(b.cards) == 1
	}
	return b, true
}

// indexList parses "0,1,3": plain non-negative numbers without spaces, as
// Slurm writes them, no repeats, at most 4096.
func indexList(s string) ([]int, bool) {
	if s == "" {
		return nil, false
	}
	parts := strings.Split(s, ",")
	if len(parts) > 4096 {
		return nil, false
	}
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p != strconv.Itoa(n) || slices.Contains(out, n) {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// maskForm matches what Level Zero reads in ZE_AFFINITY_MASK: entries
// "d", "d.s" (or compute-runtime's "d.s.c"), comma-separated.
func maskForm(s string) bool {
	for _, e := range strings.Split(s, ",") {
		parts := strings.Split(e, ".")
		if len(parts) > 3 {
			return false
		}
		for _, p := range parts {
			if p == "" || strings.Trim(p, "0123456789") != "" {
				return false
			}
		}
	}
	return true
}

// userMask is the warning for a ZE_AFFINITY_MASK of the user's.
func userMask(mask string) string {
	if !maskForm(mask) {
		return fmt.Sprintf("devices: keeping ZE_AFFINITY_MASK=%q from the environment, though it is not a list of devices (0,1) or tiles (0.1) as Level Zero reads it", mask)
	}
	return fmt.Sprintf("devices: keeping ZE_AFFINITY_MASK=%s from the environment: every local rank sees the devices it names", mask)
}

// namesDevices reports whether a ONEAPI_DEVICE_SELECTOR value picks
// devices by number or sub-device ("level_zero:0", "level_zero:0.1",
// "*:*.*"), rather than by backend and type only ("level_zero:gpu",
// "opencl:gpu;level_zero:gpu", "!opencl:*"). Its terms are
// [!]backend:device[,device...], separated by ';' (DPC++'s
// EnvironmentVariables.md); a term without a ':' is malformed, which SYCL
// rejects, and is left to the user too.
func namesDevices(sel string) bool {
	for _, term := range strings.Split(sel, ";") {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		_, devs, ok := strings.Cut(term, ":")
		if !ok {
			return true
		}
		for _, d := range strings.Split(devs, ",") {
			switch strings.ToLower(strings.TrimSpace(d)) {
			case "*", "gpu", "cpu", "fpga", "acc":
			default:
				return true
			}
		}
	}
	return false
}

// intelMPIPins reports Intel MPI's GPU pinning turned on: I_MPI_OFFLOAD_PIN
// set to a non-zero number, or I_MPI_OFFLOAD=1 or 2 (all GPU features) when
// I_MPI_OFFLOAD_PIN is unset. Intel MPI's Developer Reference ("GPU
// Pinning"): setting ZE_AFFINITY_MASK turns it off.
func intelMPIPins(getenv topology.Getenv) (string, bool) {
	if v := getenv("I_MPI_OFFLOAD_PIN"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		return "I_MPI_OFFLOAD_PIN=" + v, err == nil && n != 0
	}
	switch v := strings.TrimSpace(getenv("I_MPI_OFFLOAD")); v {
	case "1", "2":
		return "I_MPI_OFFLOAD=" + v, true
	}
	return "", false
}
