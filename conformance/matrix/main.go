// Command matrix turns the `go test -json` output of the conformance suite into a Markdown
// compatibility matrix: one row per check (<Area>/<check>), one column per target, each cell the
// check's result there. It reads the JSON from standard input and writes Markdown to standard
// output:
//
//	go test -json ./conformance/... | go run ./conformance/matrix > docs/compatibility.md
//
// With -keep FILE, the section of FILE between the client matrix markers (written by the
// clientmatrix test, `make client-matrix`) is carried over after the conformance table.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is the part of a test2json record the matrix needs.
type event struct {
	Action string
	Test   string
}

// result is the outcome of one check on one target.
type result struct{ row, target, action string }

// The client matrix section's markers (clientmatrix/doc_test.go writes them).
const (
	keepBegin = "<!-- client-matrix:begin -->"
	keepEnd   = "<!-- client-matrix:end -->"
)

func main() {
	keep := flag.String("keep", "", "carry the client matrix section of this file over into the output")
	flag.Parse()
	var section string
	if *keep != "" {
		b, err := os.ReadFile(*keep)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		section = keptSection(string(b))
	}
	out := io.Writer(os.Stdout)
	if err := run(os.Stdin, out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if section != "" {
		if _, err := io.WriteString(out, "\n"+section); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// keptSection returns the client matrix section of doc, markers included, or "".
func keptSection(doc string) string {
	i, j := strings.Index(doc, keepBegin), strings.Index(doc, keepEnd)
	if i < 0 || j < i {
		return ""
	}
	return doc[i:j+len(keepEnd)] + "\n"
}

func run(in io.Reader, out io.Writer) error {
	results, err := parse(in)
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return errors.New("matrix: no conformance results in the input")
	}
	_, err = io.WriteString(out, render(results))
	return err
}

// parse reads test2json records and keeps the final action of every Test<Area>/<target>/<check>.
func parse(in io.Reader) ([]result, error) {
	var results []result
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // go test prints non-JSON lines for build failures; they carry no results
		}
		if ev.Action != "pass" && ev.Action != "fail" && ev.Action != "skip" {
			continue
		}
		parts := strings.Split(ev.Test, "/")
		if len(parts) != 3 || !strings.HasPrefix(parts[0], "Test") {
			continue
		}
		area := strings.TrimPrefix(parts[0], "Test")
		results = append(results, result{row: area + "/" + parts[2], target: parts[1], action: ev.Action})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("matrix: read input: %w", err)
	}
	return results, nil
}

var symbols = map[string]string{"pass": "pass", "fail": "**FAIL**", "skip": "skip", "": "–"}

// render writes the matrix: targets in order of first appearance, rows sorted.
func render(results []result) string {
	var targets, rows []string
	cells := map[[2]string]string{}
	totals := map[string]map[string]int{}
	for _, r := range results {
		if !slices.Contains(targets, r.target) {
			targets = append(targets, r.target)
			totals[r.target] = map[string]int{}
		}
		if !slices.Contains(rows, r.row) {
			rows = append(rows, r.row)
		}
		cells[[2]string{r.row, r.target}] = r.action
		totals[r.target][r.action]++
	}
	slices.Sort(rows)
	var b strings.Builder
	b.WriteString("# Compatibility matrix\n\nGenerated from `go test -json ./conformance/...` by `conformance/matrix`; do not edit by hand.\n\nThe differences from Apache ZooKeeper that remain, each with its reason, are listed in\n[differences.md](differences.md).\n\n")
	for _, tg := range targets {
		fmt.Fprintf(&b, "- %s: %d pass, %d fail, %d skip\n", tg, totals[tg]["pass"], totals[tg]["fail"], totals[tg]["skip"])
	}
	b.WriteString("\n| check | " + strings.Join(targets, " | ") + " |\n|---|" + strings.Repeat("---|", len(targets)) + "\n")
	for _, row := range rows {
		b.WriteString("| " + row + " |")
		for _, tg := range targets {
			b.WriteString(" " + symbols[cells[[2]string{row, tg}]] + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}
