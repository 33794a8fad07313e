package envsetup

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/envsetup/intelgpu"
	"github.com/batchkit/batchkit/topology"
)

// gpus is n discrete cards of tiles tiles each, on PCI buses 0x18, 0x19, ...
// (card1, card2, ...), that this process can open.
func gpus(n, tiles int) []intelgpu.Card {
	var cards []intelgpu.Card
	for i := range n {
		cards = append(cards, intelgpu.Card{Name: fmt.Sprintf("card%d", i+1), Render: fmt.Sprintf("renderD%d", 128+i),
			PCI: fmt.Sprintf("0000:%02x:00.0", 0x18+i), Driver: "i915", DeviceID: "0BD5", Tiles: tiles, Usable: true})
	}
	return cards
}

// igpu is the processor's graphics at 0000:00:02.0.
var igpu = intelgpu.Card{Name: "card0", Render: "renderD129", PCI: "0000:00:02.0", Driver: "i915",
	DeviceID: "7D55", Integrated: true, Tiles: 1, Usable: true}

func unusable(cards []intelgpu.Card) []intelgpu.Card {
	out := append([]intelgpu.Card(nil), cards...)
	for i := range out {
		out[i].Usable = false
	}
	return out
}

func mask(m string) map[string]string { return map[string]string{"ZE_AFFINITY_MASK": m} }

func TestDeviceAffinity(t *testing.T) {
	pvc := gpus(6, 2) // a Data Center GPU Max node: 6 cards of 2 tiles
	arc := gpus(2, 1)
	for _, tc := range []struct {
		name     string
		topo     topology.Topology
		cards    []intelgpu.Card
		env      map[string]string
		want     map[string]string
		warnings []string
	}{{
		name: "no Intel GPU: nothing, no warning",
		topo: topo(topology.Torchrun, 1, 2),
	}, {
		name: "only integrated graphics: nothing",
		topo: topo(topology.Torchrun, 1, 2), cards: []intelgpu.Card{igpu},
	}, {
		name: "cards this process cannot open (device cgroup, no render group): nothing",
		topo: topo(topology.Torchrun, 1, 2), cards: unusable(pvc),
	}, {
		name: "the node's only rank keeps every device",
		topo: topo(topology.Single, 0, 1), cards: pvc,
	}, {
		name: "12 ranks on 6 two-tile cards, FLAT by default: a tile each, xpu:LOCAL_RANK, which needs no mask",
		topo: topo(topology.Slurm, 5, 12), cards: pvc, env: map[string]string{"SLURM_STEP_ID": "0"},
	}, {
		name: "6 ranks on 6 two-tile cards, FLAT: a card each (its first tile), the same mask in every rank",
		topo: topo(topology.Torchrun, 2, 6), cards: pvc,
		want: mask("0,2,4,6,8,10"),
	}, {
		name: "4 ranks on 12 tiles: spread over the cards in order",
		topo: topo(topology.Hydra, 3, 4), cards: pvc,
		want: mask("0,3,6,9"),
	}, {
		name: "8 ranks on 12 tiles",
		topo: topo(topology.Torchrun, 7, 8), cards: pvc,
		want: mask("0,1,3,4,6,7,9,10"),
	}, {
		name: "COMPOSITE, 4 ranks on 6 cards: cards 0, 1, 3 and 4",
		topo: topo(topology.Torchrun, 1, 4), cards: pvc, env: map[string]string{"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"},
		want: mask("0,1,3,4"),
	}, {
		name: "COMPOSITE, 12 ranks on 6 cards: ranks share cards, and FLAT is suggested",
		topo: topo(topology.Torchrun, 5, 12), cards: pvc, env: map[string]string{"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"},
		warnings: []string{"devices: 12 local ranks on 6 Intel GPU card(s): ranks share them (local rank r's is xpu:(r mod 6)); ZE_FLAT_DEVICE_HIERARCHY=FLAT would give each rank a tile"},
	}, {
		name: "COMBINED numbers tiles as FLAT does",
		topo: topo(topology.Torchrun, 0, 6), cards: pvc, env: map[string]string{"ZE_FLAT_DEVICE_HIERARCHY": "COMBINED"},
		want: mask("0,2,4,6,8,10"),
	}, {
		name: "more ranks than tiles: all of them, one warning",
		topo: topo(topology.Torchrun, 0, 16), cards: pvc,
		warnings: []string{"devices: 16 local ranks on 12 Intel GPU tile(s): ranks share them (local rank r's is xpu:(r mod 12))"},
	}, {
		name: "3 ranks on 2 single-tile cards share them",
		topo: topo(topology.Torchrun, 0, 3), cards: arc,
		warnings: []string{"devices: 3 local ranks on 2 Intel GPU card(s): ranks share them (local rank r's is xpu:(r mod 2))"},
	}, {
		name: "integrated graphics come after the discrete cards and are never given out",
		topo: topo(topology.Torchrun, 1, 2), cards: append([]intelgpu.Card{igpu}, arc...),
		want: mask("0,1"),
	}, {
		name: "ZE_ENABLE_PCI_ID_DEVICE_ORDER=1: the integrated GPU is device 0, the discrete cards 1 and 2",
		topo: topo(topology.Torchrun, 1, 2), cards: append([]intelgpu.Card{igpu}, arc...),
		env:  map[string]string{"ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1"},
		want: mask("1,2"),
	}, {
		name: "PCI order with FLAT: the integrated GPU's tile shifts the numbering by one",
		topo: topo(topology.Torchrun, 1, 6), cards: append([]intelgpu.Card{igpu}, pvc...),
		env:  map[string]string{"ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1"},
		want: mask("1,3,5,7,9,11"),
	}, {
		name: "a card that cannot be opened is not in Level Zero's numbering",
		topo: topo(topology.Torchrun, 1, 2), cards: append(unusable(gpus(1, 1)), gpus(4, 1)[1:]...),
		want: mask("0,1"),
	}, {
		name: "the user's ZE_AFFINITY_MASK wins, with one warning",
		topo: topo(topology.Torchrun, 1, 2), cards: pvc, env: map[string]string{"ZE_AFFINITY_MASK": "3"},
		warnings: []string{"devices: keeping ZE_AFFINITY_MASK=3 from the environment: every local rank sees the devices it names"},
	}, {
		name: "a mask with spaces and junk is still the user's, and the warning says so",
		topo: topo(topology.Torchrun, 1, 2), cards: pvc, env: map[string]string{"ZE_AFFINITY_MASK": " 0, 1;x"},
		warnings: []string{`devices: keeping ZE_AFFINITY_MASK=" 0, 1;x" from the environment, though it is not a list of devices (0,1) or tiles (0.1) as Level Zero reads it`},
	}, {
		name: "ONEAPI_DEVICE_SELECTOR naming a device: the user's choice, no mask",
		topo: topo(topology.Torchrun, 1, 2), cards: pvc, env: map[string]string{"ONEAPI_DEVICE_SELECTOR": "level_zero:0.1"},
		warnings: []string{`devices: ONEAPI_DEVICE_SELECTOR="level_zero:0.1" picks devices by number: ZE_AFFINITY_MASK not set (it would renumber them)`},
	}, {
		name: "ONEAPI_DEVICE_SELECTOR naming backends and types only: the mask is set beside it",
		topo: topo(topology.Torchrun, 1, 6), cards: pvc, env: map[string]string{"ONEAPI_DEVICE_SELECTOR": "opencl:gpu;level_zero:gpu"},
		want: mask("0,2,4,6,8,10"),
	}, {
		name: "Intel MPI's own GPU pinning: no mask, which would turn it off",
		topo: topo(topology.Hydra, 1, 6), cards: pvc, env: map[string]string{"I_MPI_OFFLOAD_PIN": "1"},
		warnings: []string{"devices: I_MPI_OFFLOAD_PIN=1: Intel MPI pins GPUs itself, ZE_AFFINITY_MASK not set (it would turn that off)"},
	}, {
		name: "I_MPI_OFFLOAD_PIN=0 outranks I_MPI_OFFLOAD=1",
		topo: topo(topology.Hydra, 1, 6), cards: pvc, env: map[string]string{"I_MPI_OFFLOAD_PIN": "0", "I_MPI_OFFLOAD": "1"},
		want: mask("0,2,4,6,8,10"),
	}, {
		name: "a junk ZE_FLAT_DEVICE_HIERARCHY: warned about, Level Zero's default assumed",
		topo: topo(topology.Torchrun, 3, 6), cards: pvc, env: map[string]string{"ZE_FLAT_DEVICE_HIERARCHY": "flat"},
		want:     mask("0,2,4,6,8,10"),
		warnings: []string{`devices: ZE_FLAT_DEVICE_HIERARCHY="flat" is not FLAT, COMPOSITE or COMBINED: Level Zero ignores it, ZE_AFFINITY_MASK is computed for its default`},
	}, {
		name: "srun --gpus-per-task=1, ConstrainDevices, COMPOSITE: Slurm's mask is the task's own and stays",
		topo: topo(topology.Slurm, 3, 4), cards: gpus(4, 2),
		env: map[string]string{"SLURM_STEP_GPUS": "7", "ZE_AFFINITY_MASK": "3", "GPU_DEVICE_ORDINAL": "3",
			"SLURM_GPUS_ON_NODE": "4", "ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"},
	}, {
		name: "the same under FLAT: Slurm's card 3 is written as its tiles 6 and 7",
		topo: topo(topology.Slurm, 3, 4), cards: gpus(4, 2),
		env:  map[string]string{"SLURM_STEP_GPUS": "7", "ZE_AFFINITY_MASK": "3", "GPU_DEVICE_ORDINAL": "3", "SLURM_GPUS_ON_NODE": "4"},
		want: mask("6,7"),
	}, {
		name: "the step's 2 cards shared by 4 tasks (ConstrainDevices), FLAT: Slurm's cards 0,1 are tiles 0-3, one a task",
		topo: topo(topology.Slurm, 3, 4), cards: gpus(2, 2),
		env:  map[string]string{"SLURM_STEP_GPUS": "4,5", "ZE_AFFINITY_MASK": "0,1", "SLURM_GPUS_ON_NODE": "2"},
		want: mask("0,1,2,3"),
	}, {
		name: "no device cgroup: Slurm's mask holds global indices; 2 tasks on its 3 cards take cards 1 and 2",
		topo: topo(topology.Slurm, 1, 2), cards: gpus(4, 1),
		env:  map[string]string{"SLURM_STEP_GPUS": "1,2,3", "ZE_AFFINITY_MASK": "1,2,3", "SLURM_GPUS_ON_NODE": "3"},
		want: mask("1,2"),
	}, {
		name: "the step's only task keeps all the cards Slurm bound",
		topo: topo(topology.Slurm, 0, 1), cards: gpus(4, 1),
		env: map[string]string{"SLURM_STEP_GPUS": "1,2,3", "ZE_AFFINITY_MASK": "1,2,3", "SLURM_GPUS_ON_NODE": "3"},
	}, {
		name: "gres.conf without intel_gpu_env: GPU_DEVICE_ORDINAL's index; 2 tasks share the one card",
		topo: topo(topology.Slurm, 1, 2), cards: gpus(2, 1),
		env:      map[string]string{"SLURM_STEP_GPUS": "5", "GPU_DEVICE_ORDINAL": "1", "SLURM_GPUS_ON_NODE": "1"},
		want:     mask("1"),
		warnings: []string{"devices: 2 local ranks on 1 Intel GPU card(s): ranks share them (local rank r's is xpu:(r mod 1))"},
	}, {
		name: "only SLURM_JOB_GPUS (a batch script), all cards visible: its global index, one card is the task's own",
		topo: topo(topology.Torchrun, 1, 2), cards: arc,
		env:  map[string]string{"SLURM_JOB_GPUS": "1"},
		want: mask("1"),
	}, {
		name: "inside a step, a mask not of Slurm's form is the user's",
		topo: topo(topology.Slurm, 1, 2), cards: gpus(4, 1),
		env:      map[string]string{"SLURM_STEP_GPUS": "0,1", "ZE_AFFINITY_MASK": "1", "SLURM_GPUS_ON_NODE": "2"},
		warnings: []string{"devices: keeping ZE_AFFINITY_MASK=1 from the environment: every local rank sees the devices it names"},
	}, {
		name: "Slurm's indices beyond the cards this rank can open: left as they are, with a warning",
		topo: topo(topology.Slurm, 0, 2), cards: gpus(4, 1),
		env:      map[string]string{"SLURM_STEP_GPUS": "6", "ZE_AFFINITY_MASK": "6", "GPU_DEVICE_ORDINAL": "6"},
		warnings: []string{"devices: Slurm bound device(s) 6, but this rank can open 4 Intel GPU(s): ZE_AFFINITY_MASK left as it is"},
	}, {
		name: "junk in SLURM_STEP_GPUS: no Slurm binding, so its mask counts as the user's",
		topo: topo(topology.Slurm, 0, 2), cards: gpus(4, 1),
		env:      map[string]string{"SLURM_STEP_GPUS": "0-1", "ZE_AFFINITY_MASK": "0,1"},
		warnings: []string{"devices: keeping ZE_AFFINITY_MASK=0,1 from the environment: every local rank sees the devices it names"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = map[string]string{}
			}
			set, warnings := DeviceAffinity(tc.topo, tc.cards, topology.MapEnv(env))
			if d := cmp.Diff(tc.want, set); d != "" {
				t.Errorf("set (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.warnings, warnings); d != "" {
				t.Errorf("warnings (-want +got):\n%s", d)
			}
		})
	}
}

// Every local rank of a node computes the same mask, which has one device
// per rank (or none, when that is every device), whatever the counts.
func TestDeviceAffinityOneDeviceEach(t *testing.T) {
	for _, cards := range []int{1, 2, 4, 6, 8} {
		for _, tiles := range []int{1, 2, 4} {
			for _, mode := range []string{"FLAT", "COMPOSITE"} {
				devices := cards * tiles
				if mode == "COMPOSITE" {
					devices = cards
				}
				for n := 2; n <= devices; n++ {
					env := topology.MapEnv(map[string]string{"ZE_FLAT_DEVICE_HIERARCHY": mode})
					first, w := DeviceAffinity(topo(topology.Torchrun, 0, n), gpus(cards, tiles), env)
					entries := splitMask(first["ZE_AFFINITY_MASK"])
					if len(w) != 0 || (first == nil) != (n == devices) || first != nil && len(entries) != n {
						t.Fatalf("%d cards x %d tiles, %s, %d ranks: %v %q", cards, tiles, mode, n, first, w)
					}
					for r := 1; r < n; r++ {
						set, _ := DeviceAffinity(topo(topology.Torchrun, r, n), gpus(cards, tiles), env)
						if d := cmp.Diff(first, set); d != "" {
							t.Errorf("%d cards x %d tiles, %s, rank %d of %d differs from rank 0:\n%s", cards, tiles, mode, r, n, d)
						}
					}
					seen := map[string]bool{}
					for _, e := range entries {
						if seen[e] {
							t.Errorf("%d cards x %d tiles, %s, %d ranks: %s twice in %v", cards, tiles, mode, n, e, first)
						}
						seen[e] = true
					}
				}
			}
		}
	}
}

func splitMask(m string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(m); i++ {
		if i == len(m) || m[i] == ',' {
			out = append(out, m[start:i])
			start = i + 1
		}
	}
	return out
}

func TestNamesDevices(t *testing.T) {
	for sel, want := range map[string]bool{
		"":                          false,
		"level_zero:gpu":            false,
		"opencl:gpu;level_zero:gpu": false,
		"*:*":                       false,
		"!opencl:*":                 false,
		"level_zero:0":              true,
		"level_zero:0,1":            true,
		"level_zero:0.1":            true,
		"level_zero:*.*":            true,
		"gpu":                       true, // no backend: SYCL rejects it, left to the user
	} {
		if got := namesDevices(sel); got != want {
			t.Errorf("namesDevices(%q) = %v, want %v", sel, got, want)
		}
	}
}
