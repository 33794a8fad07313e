package intelgpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fake is one DRM card of a fake sysfs tree, laid out as the kernel does:
// the device directory under sys/devices, sys/class/drm/cardN a symlink to
// its drm/cardN, and cardN/device a symlink back to the PCI device.
type fake struct {
	name, pci, uevent string
	render            string   // render node name, "" for none
	node              bool     // dev/dri/<render> exists (openable)
	dirs              []string // more directories, relative to the PCI device ("tile1") or to cardN ("@gt/gt1")
}

func intel(name, pci, driver, render string, dirs ...string) fake {
	return fake{name: name, pci: pci, render: render, node: true, dirs: dirs,
		uevent: fmt.Sprintf("DRIVER=%s\nPCI_CLASS=38000\nPCI_ID=8086:0bd5\nPCI_SUBSYS_ID=8086:0000\nPCI_SLOT_NAME=%s\nMODALIAS=pci:v00008086d00000BD5\n", driver, pci)}
}

func build(t *testing.T, cards ...fake) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	class := filepath.Join(root, "sys/class/drm")
	must(os.MkdirAll(class, 0o755))
	must(os.MkdirAll(filepath.Join(root, "dev/dri"), 0o755))
	for _, c := range cards {
		dev := filepath.Join(root, "sys/devices/pci0000:00", c.pci)
		card := filepath.Join(dev, "drm", c.name)
		must(os.MkdirAll(card, 0o755))
		if c.uevent != "" {
			must(os.WriteFile(filepath.Join(dev, "uevent"), []byte(c.uevent), 0o644))
		}
		must(os.Symlink("../../../"+c.pci, filepath.Join(card, "device")))
		must(os.Symlink("../../devices/pci0000:00/"+c.pci+"/drm/"+c.name, filepath.Join(class, c.name)))
		if c.render != "" {
			must(os.MkdirAll(filepath.Join(dev, "drm", c.render), 0o755))
			if c.node {
				must(os.WriteFile(filepath.Join(root, "dev/dri", c.render), nil, 0o666))
			}
		}
		for _, d := range c.dirs {
			p := filepath.Join(dev, d)
			if rest, ok := strings.CutPrefix(d, "@"); ok {
				p = filepath.Join(card, rest)
			}
			must(os.MkdirAll(p, 0o755))
		}
	}
	return root
}

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cards []fake
		extra func(t *testing.T, root string)
		want  []Card
	}{{
		name: "no Intel GPU: an ASPEED BMC's display-only card",
		cards: []fake{{name: "card0", pci: "0000:03:00.0", render: "",
			uevent: "DRIVER=ast\nPCI_ID=1A03:2000\nPCI_SLOT_NAME=0000:03:00.0\n"}},
	}, {
		name: "two Max 1550 cards under i915: two tiles each (gt/gt0, gt/gt1), sorted by PCI address",
		cards: []fake{
			intel("card2", "0000:9a:00.0", "i915", "renderD129", "@gt/gt0", "@gt/gt1"),
			intel("card1", "0000:18:00.0", "i915", "renderD128", "@gt/gt0", "@gt/gt1"),
		},
		want: []Card{
			{Name: "card1", Render: "renderD128", PCI: "0000:18:00.0", Driver: "i915", DeviceID: "0BD5", Tiles: 2, Usable: true},
			{Name: "card2", Render: "renderD129", PCI: "0000:9a:00.0", Driver: "i915", DeviceID: "0BD5", Tiles: 2, Usable: true},
		},
	}, {
		name: "xe: tiles are device/tileN; a gt directory or a file named like a tile is not one",
		cards: []fake{
			intel("card0", "0000:18:00.0", "xe", "renderD128", "tile0", "tile1", "tile0/gt0", "tile0/gt1", "tiles"),
			intel("card1", "0000:29:00.0", "xe", "renderD129", "tile0"),
		},
		extra: func(t *testing.T, root string) {
			os.WriteFile(filepath.Join(root, "sys/devices/pci0000:00/0000:29:00.0/tile1"), []byte("junk"), 0o644)
		},
		want: []Card{
			{Name: "card0", Render: "renderD128", PCI: "0000:18:00.0", Driver: "xe", DeviceID: "0BD5", Tiles: 2, Usable: true},
			{Name: "card1", Render: "renderD129", PCI: "0000:29:00.0", Driver: "xe", DeviceID: "0BD5", Tiles: 1, Usable: true},
		},
	}, {
		name:  "integrated graphics at 00:02.0: one tile, though Meteor Lake's i915 shows a media GT as gt1",
		cards: []fake{intel("card0", "0000:00:02.0", "i915", "renderD128", "@gt/gt0", "@gt/gt1")},
		want: []Card{{Name: "card0", Render: "renderD128", PCI: "0000:00:02.0", Driver: "i915", DeviceID: "0BD5",
			Integrated: true, Tiles: 1, Usable: true}},
	}, {
		name: "a card without a render node is display-only; one whose /dev/dri node is missing is not usable",
		cards: []fake{
			intel("card0", "0000:18:00.0", "i915", ""),
			func() fake { f := intel("card1", "0000:29:00.0", "i915", "renderD129"); f.node = false; return f }(),
		},
		want: []Card{{Name: "card1", Render: "renderD129", PCI: "0000:29:00.0", Driver: "i915", DeviceID: "0BD5", Tiles: 1}},
	}, {
		name: "careless input: junk and missing uevents, another vendor, a bad address, connectors, a symlink loop",
		cards: []fake{
			{name: "card0", pci: "0000:10:00.0", render: "renderD128", node: true, uevent: "\x00\xff\x01 garbage = = =\n"},
			{name: "card1", pci: "0000:11:00.0", render: "renderD129", node: true},
			{name: "card2", pci: "0000:12:00.0", render: "renderD130", node: true, uevent: "DRIVER=amdgpu\nPCI_ID=1002:740F\nPCI_SLOT_NAME=0000:12:00.0\n"},
			{name: "card3", pci: "0000:13:00.0", render: "renderD131", node: true, uevent: "DRIVER=i915\nPCI_ID=8086:0BD5\nPCI_SLOT_NAME=../../etc\n"},
			{name: "card4", pci: "0000:14:00.0", render: "renderD132", node: true, uevent: "DRIVER=nouveau\nPCI_ID=8086:0BD5\nPCI_SLOT_NAME=0000:14:00.0\n"},
			intel("card5", "0000:15:00.0", "i915", "renderD133"),
		},
		extra: func(t *testing.T, root string) {
			class := filepath.Join(root, "sys/class/drm")
			os.Symlink("card9", filepath.Join(class, "card9"))
			os.Symlink("card5", filepath.Join(class, "card5-DP-1"))
			os.Symlink("card5", filepath.Join(class, "renderD133"))
			os.WriteFile(filepath.Join(class, "version"), []byte("drm 1.1.0 20060810\n"), 0o644)
		},
		want: []Card{{Name: "card5", Render: "renderD133", PCI: "0000:15:00.0", Driver: "i915", DeviceID: "0BD5", Tiles: 1, Usable: true}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := build(t, tc.cards...)
			if tc.extra != nil {
				tc.extra(t, root)
			}
			got, err := Read(root)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// A node with more cards than anyone has: the first MaxCards by number.
func TestReadManyCards(t *testing.T) {
	var cards []fake
	for i := range MaxCards + 44 {
		cards = append(cards, intel(fmt.Sprintf("card%d", i), fmt.Sprintf("0001:%02x:%02x.0", i/32, i%32), "xe", fmt.Sprintf("renderD%d", 128+i), "tile0"))
	}
	got, err := Read(build(t, cards...))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxCards || got[0].Name != "card0" || got[MaxCards-1].Name != fmt.Sprintf("card%d", MaxCards-1) {
		t.Errorf("got %d cards, %s to %s", len(got), got[0].Name, got[len(got)-1].Name)
	}
}

func TestReadNoDRM(t *testing.T) {
	got, err := Read(t.TempDir())
	if err != nil || got != nil {
		t.Errorf("Read(empty root) = %v, %v; want nothing", got, err)
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "sys/class"), 0o755)
	os.WriteFile(filepath.Join(root, "sys/class/drm"), []byte("not a directory"), 0o644)
	if _, err := Read(root); err == nil {
		t.Error("Read of a sys/class/drm that is a file: no error")
	}
}

// The real machine: whatever it has, every card read is Intel's and has a
// render node and at least one tile.
func TestReadHost(t *testing.T) {
	got, err := Read("/")
	if err != nil {
		t.Skip(err)
	}
	for _, c := range got {
		if c.Render == "" || c.Tiles < 1 || c.PCI == "" {
			t.Errorf("Read(/) card %+v", c)
		}
	}
}

func TestComparePCI(t *testing.T) {
	sorted := []string{"0000:00:02.0", "0000:18:00.0", "0000:9a:00.0", "0000:9a:00.1", "0000:9b:00.0", "ffff:00:00.0", "10000:01:00.0"}
	for i := range sorted {
		for j := range sorted {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := ComparePCI(sorted[i], sorted[j]); got != want {
				t.Errorf("ComparePCI(%s, %s) = %d, want %d", sorted[i], sorted[j], got, want)
			}
		}
	}
}
