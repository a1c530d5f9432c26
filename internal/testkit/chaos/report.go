package chaos

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary formats the results of several runs: per target, runs, faults and violations per check;
// the faults by kind; and the time to serve again per fault kind (min, median, max), over the
// servers each fault hit and over every server.
func Summary(results []*RunResult) string {
	var targets []string
	by := map[string][]*RunResult{}
	for _, r := range results {
		if _, ok := by[r.Target]; !ok {
			targets = append(targets, r.Target)
		}
		by[r.Target] = append(by[r.Target], r)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "target\truns\tfaults\t%s\tseeds\n", strings.Join(Checks, "\t"))
	for _, t := range targets {
		rs := by[t]
		faults := 0
		var seeds []string
		for _, r := range rs {
			for _, n := range r.Faults {
				faults += n
			}
			seeds = append(seeds, fmt.Sprint(r.Seed))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d", t, len(rs), faults)
		for _, c := range Checks {
			n := 0
			for _, r := range rs {
				n += r.Count(c)
			}
			fmt.Fprintf(tw, "\t%d", n)
		}
		fmt.Fprintf(tw, "\t%s\n", strings.Join(seeds, ","))
	}
	tw.Flush()

	b.WriteString("\nfaults by kind\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "target\t%s\n", strings.Join(Faults, "\t"))
	for _, t := range targets {
		fmt.Fprint(tw, t)
		for _, f := range Faults {
			n := 0
			for _, r := range by[t] {
				n += r.Faults[f]
			}
			fmt.Fprintf(tw, "\t%d", n)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	b.WriteString("\ntime to serve again after a heal, seconds (n min median max): the servers the fault hit | all servers\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "fault")
	for _, t := range targets {
		fmt.Fprintf(tw, "\t%s hit\t%s all", t, t)
	}
	fmt.Fprintln(tw)
	for _, f := range Faults {
		if f == FaultSilentClient {
			continue
		}
		fmt.Fprint(tw, f)
		for _, t := range targets {
			var hit, all []time.Duration
			for _, r := range by[t] {
				hit = append(hit, r.VictimServe[f]...)
				all = append(all, r.Serve[f]...)
			}
			fmt.Fprintf(tw, "\t%s\t%s", spread(hit), spread(all))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	return b.String()
}

// spread formats n, min, median and max of ds in seconds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return fmt.Sprintf("%d %.1f %.1f %.1f", len(ds), ds[0].Seconds(), ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds())
}
