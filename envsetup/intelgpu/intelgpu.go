// Package intelgpu reads this node's Intel GPUs from sysfs, as much of them
// as Level Zero's device numbering depends on: each DRM card driven by i915
// or xe with a render node, its PCI address (Level Zero orders devices by
// it), whether it is the processor's integrated graphics, how many tiles
// (stacks) it has and whether this process may open its render node.
//
// It only reads files: no Level Zero library is needed (login nodes and CI
// have none), and a tree under any root can stand in for "/" in tests.
// Which device a rank gets is envsetup.DeviceAffinity's business.
package intelgpu

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Card is one Intel GPU as the kernel shows it under /sys/class/drm.
type Card struct {
	Name   string // the DRM card, "card1"
	Render string // its render node, "renderD128": what Level Zero opens
	PCI    string // PCI address, "0000:8c:00.0"
	Driver string // "i915" or "xe"
	// DeviceID is the PCI device ID ("0BD5"), for messages.
	DeviceID string
	// Integrated is the processor's own graphics: the device at PCI
	// address 0000:00:02.0, which Intel reserves for it. Level Zero
	// exposes it too (after the discrete cards unless
	// ZE_ENABLE_PCI_ID_DEVICE_ORDER=1), so it counts in the numbering,
	// but batchkit never gives it to a rank.
	Integrated bool
	// Tiles is the number of tiles (stacks), at least 1: xe's
	// device/tileN directories, i915's gt/gtN directories. Level Zero
	// exposes each tile as a device of its own in its FLAT hierarchy
	// (the default on multi-tile Data Center GPU Max) and as a
	// sub-device in COMPOSITE. Integrated graphics count 1: i915's gt1 on
	// Meteor Lake is its media GT, not a tile.
	Tiles int
	// Usable is whether this process can open /dev/dri/<Render> for
	// reading and writing, as Level Zero does: a device cgroup (Slurm's
	// ConstrainDevices), a missing render group or a container without
	// the device hide a card from Level Zero, and from its numbering.
	Usable bool
}

// Limits that keep a strange tree from costing much: entries read from
// /sys/class/drm and from a card's directories, Intel cards kept, tiles
// counted per card.
const (
	maxEntries = 4096
	MaxCards   = 256
	maxTiles   = 16
	maxFile    = 16 << 10
)

var (
	cardName   = regexp.MustCompile(`^card[0-9]+$`)
	renderName = regexp.MustCompile(`^renderD[0-9]+$`)
	xeTile     = regexp.MustCompile(`^tile[0-9]+$`)
	i915GT     = regexp.MustCompile(`^gt[0-9]+$`)
	pciAddr    = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
)

// integratedPCI is where Intel puts the processor's graphics device.
const integratedPCI = "0000:00:02.0"

// Read returns the Intel GPUs under root ("/" in production): every
// sys/class/drm/cardN whose device/uevent names vendor 8086, driver i915
// or xe and a PCI address, and whose device/drm holds a render node (a
// card without one is display-only: Level Zero cannot use it). The result
// is sorted by PCI address, at most MaxCards long.
//
// A card whose files are missing, unreadable, full of junk or part of a
// symlink loop is left out, not an error: a rank's pinning must not fail
// for one odd device. No sys/class/drm (a container) is no cards. The error
// is for a sys/class/drm that exists and cannot be listed.
func Read(root string) ([]Card, error) {
	dir := filepath.Join(root, "sys/class/drm")
	names, err := readNames(dir, maxEntries)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(names, func(i, j int) bool { return cardLess(names[i], names[j]) })
	var cards []Card
	seen := map[string]bool{}
	for _, name := range names {
		if !cardName.MatchString(name) {
			continue
		}
		c, ok := readCard(root, filepath.Join(dir, name))
		if !ok || seen[c.PCI] {
			continue
		}
		seen[c.PCI] = true
		c.Name = name
		cards = append(cards, c)
		if len(cards) == MaxCards {
			break
		}
	}
	sort.SliceStable(cards, func(i, j int) bool { return ComparePCI(cards[i].PCI, cards[j].PCI) < 0 })
	return cards, nil
}

// ComparePCI orders PCI addresses ("0000:8c:00.0") by domain, bus, device
// and function as numbers, as Level Zero does (a VMD domain such as 10000
// is longer than 0000, so text order would not do).
func ComparePCI(a, b string) int {
	ka, kb := pciKey(a), pciKey(b)
	for i := range ka {
		if ka[i] != kb[i] {
			if ka[i] < kb[i] {
				return -1
			}
			return 1
		}
	}
	return strings.Compare(a, b)
}

func pciKey(s string) [4]uint64 {
	var k [4]uint64
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == '.' })
	for i := 0; i < len(parts) && i < 4; i++ {
		k[i], _ = strconv.ParseUint(parts[i], 16, 64)
	}
	return k
}

// cardLess orders card names by number, so that the cards kept under
// MaxCards are the first ones.
func cardLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// readCard reads one cardN directory; ok is false for anything that is not
// a usable-looking Intel GPU.
func readCard(root, dir string) (Card, bool) {
	dev := filepath.Join(dir, "device")
	b, err := readSmall(filepath.Join(dev, "uevent"))
	if err != nil {
		return Card{}, false
	}
	var c Card
	var vendor string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "DRIVER":
			c.Driver = v
		case "PCI_ID":
			vendor, c.DeviceID, _ = strings.Cut(v, ":")
		case "PCI_SLOT_NAME":
			c.PCI = strings.ToLower(v)
		}
	}
	if !strings.EqualFold(vendor, "8086") || (c.Driver != "i915" && c.Driver != "xe") || !pciAddr.MatchString(c.PCI) {
		return Card{}, false
	}
	c.DeviceID = strings.ToUpper(c.DeviceID)
	c.Render = firstMatch(filepath.Join(dev, "drm"), renderName)
	if c.Render == "" {
		return Card{}, false
	}
	c.Integrated = c.PCI == integratedPCI
	switch {
	case c.Integrated:
		c.Tiles = 1
	case c.Driver == "xe":
		c.Tiles = countDirs(dev, xeTile)
	default:
		c.Tiles = countDirs(filepath.Join(dir, "gt"), i915GT)
	}
	c.Tiles = min(max(c.Tiles, 1), maxTiles)
	c.Usable = canOpen(filepath.Join(root, "dev/dri", c.Render))
	return c, true
}

// readSmall reads at most maxFile bytes of a file.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(bufio.NewReader(f), maxFile))
}

// readNames lists at most n names of a directory.
func readNames(dir string, n int) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(n)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, err
}

// firstMatch is the lowest-numbered name in dir that re matches, or "".
func firstMatch(dir string, re *regexp.Regexp) string {
	names, _ := readNames(dir, maxEntries)
	best := ""
	for _, n := range names {
		if re.MatchString(n) && (best == "" || cardLess(n, best)) {
			best = n
		}
	}
	return best
}

// countDirs counts the directories in dir whose names re matches.
func countDirs(dir string, re *regexp.Regexp) int {
	names, _ := readNames(dir, maxEntries)
	n := 0
	for _, name := range names {
		if !re.MatchString(name) {
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.IsDir() {
			n++
		}
	}
	return n
}

// canOpen reports whether path opens for reading and writing, as Level
// Zero opens a render node. O_NONBLOCK: a FIFO in a strange tree must not
// hang the rank.
func canOpen(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}
