package egress

import (
	"bytes"
	"embed"
	"encoding/csv"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// The IANA special-purpose address registries (iana/, with their source
// and date) decide which ranges are refused: every block they do not mark
// globally reachable. The list is read from IANA's own files, not copied
// out by hand, so no block is forgotten (the documentation ranges once
// were).
//
//go:embed iana/*.csv
var ianaFiles embed.FS

// block is one row of a registry.
type block struct {
	prefix netip.Prefix
	name   string
	// global is the row's "Globally Reachable": "True", "False", "N/A"
	// (the translation prefixes, decided by the address they embed), or
	// "" (a terminated block).
	global string
}

// registry is every block of both registries.
var registry = mustLoadRegistry()

// notInRegistry are refused too, from other registries: multicast (IANA's
// multicast registries) and the deprecated IPv6 site-local (RFC 3879).
var notInRegistry = []block{
	{netip.MustParsePrefix("224.0.0.0/4"), "Multicast", "False"},
	{netip.MustParsePrefix("ff00::/8"), "Multicast", "False"},
	{netip.MustParsePrefix("fec0::/10"), "Site-Local (deprecated)", "False"},
}

func mustLoadRegistry() []block {
	var all []block
	for _, name := range []string{"iana/iana-ipv4-special-registry-1.csv", "iana/iana-ipv6-special-registry-1.csv"} {
		raw, err := ianaFiles.ReadFile(name)
		if err != nil {
			panic(err)
		}
		blocks, err := parseRegistry(raw)
		if err != nil {
			panic(fmt.Sprintf("%s: %v", name, err))
		}
		all = append(all, blocks...)
	}
	return append(all, notInRegistry...)
}

// footnote is IANA's "[2]" after a value.
var footnote = regexp.MustCompile(`\s*\[\d+\]`)

// parseRegistry reads a registry in IANA's CSV: footnote marks after
// values, several blocks in one cell, quoted cells with line breaks.
func parseRegistry(raw []byte) ([]block, error) {
	rows, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) < 2 || len(rows[0]) < 9 || rows[0][0] != "Address Block" || rows[0][8] != "Globally Reachable" {
		return nil, fmt.Errorf("not an IANA special-purpose registry (%d rows)", len(rows))
	}
	var out []block
	for _, row := range rows[1:] {
		global := strings.TrimSpace(footnote.ReplaceAllString(row[8], ""))
		for _, cell := range strings.Split(footnote.ReplaceAllString(row[0], ""), ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(cell))
			if err != nil {
				return nil, fmt.Errorf("block %q: %w", row[0], err)
			}
			out = append(out, block{prefix: p, name: row[1], global: global})
		}
	}
	return out, nil
}

// special returns the most specific block holding canonical address a
// (the registries nest blocks: 192.0.0.9/32 is globally reachable inside
// 192.0.0.0/24, which is not), and whether there is one.
func special(a netip.Addr) (block, bool) {
	var best block
	found := false
	for _, b := range registry {
		if b.prefix.Contains(a) && (!found || b.prefix.Bits() > best.prefix.Bits()) {
			best, found = b, true
		}
	}
	return best, found
}

// notGlobal returns the block that makes canonical address a not globally
// reachable, if one does.
func notGlobal(a netip.Addr) (block, bool) {
	b, ok := special(a)
	if !ok || b.global == "True" {
		return block{}, false
	}
	return b, true
}
