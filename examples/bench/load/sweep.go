//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// rateStep is one step of a sweep (-rates): an absolute rate, or a
// percentage of the closed-loop capacity.
type rateStep struct {
	label string
	pct   float64 // > 0: a percentage of the capacity
	rate  float64 // > 0: requests per second
}

// of returns the step's rate given the capacity.
func (s rateStep) of(capacity float64) float64 {
	if s.pct > 0 {
		return capacity * s.pct / 100
	}
	return s.rate
}

// parseRates parses -rates: a comma-separated list of rates, each a number
// of requests per second or a percentage ("80%").
func parseRates(v string) ([]rateStep, error) {
	var steps []rateStep
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		num, pct := strings.CutSuffix(f, "%")
		x, err := strconv.ParseFloat(num, 64)
		if err != nil || !(x > 0) || x > 1e9 {
			return nil, fmt.Errorf("rate %q: want requests per second or a percentage of the capacity, above 0", f)
		}
		st := rateStep{label: f, rate: x}
		if pct {
			st = rateStep{label: f, pct: x}
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// sweep runs cfg.rates in turn, after measuring the closed-loop capacity
// when a step is a percentage and -capacity did not give it. With -json it
// prints one result per line as each step ends; otherwise a table at the
// end. It returns the exit status: 1 when any step failed (the capacity
// run failing ends the sweep).
func sweep(ctx context.Context, cfg config, eng Engine, stdout, stderr io.Writer) int {
	var results []*Result
	status := 0
	emit := func(res *Result) bool {
		res.Problem = res.problem()
		if res.Problem != "" {
			status = 1
			fmt.Fprintf(stderr, "load: step %s: %s\n", res.Step, res.Problem)
		}
		results = append(results, res)
		if cfg.json {
			if err := json.NewEncoder(stdout).Encode(res); err != nil {
				fmt.Fprintf(stderr, "load: %v\n", err)
				status = 2
				return false
			}
		}
		return true
	}
	capacity := cfg.capacity
	needCapacity := false
	for _, st := range cfg.rates {
		needCapacity = needCapacity || st.pct > 0
	}
	if needCapacity && capacity == 0 {
		c := cfg
		c.Rate, c.rates = 0, nil
		fmt.Fprintf(stderr, "load: measuring the closed-loop capacity\n")
		res, err := measure(ctx, c, eng, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "load: capacity: %v\n", err)
			return 2
		}
		res.Step = "capacity"
		if !emit(res) || res.Problem != "" {
			writeSweep(cfg, stdout, results)
			return max(status, 1)
		}
		capacity = res.RPS
	}
	for _, st := range cfg.rates {
		if ctx.Err() != nil {
			break
		}
		c := cfg
		c.Rate, c.rates = st.of(capacity), nil
		fmt.Fprintf(stderr, "load: step %s: %.0f req/s\n", st.label, c.Rate)
		res, err := measure(ctx, c, eng, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "load: step %s: %v\n", st.label, err)
			writeSweep(cfg, stdout, results)
			return 2
		}
		res.Step = st.label
		if !emit(res) {
			return status
		}
	}
	writeSweep(cfg, stdout, results)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "load: %v\n", errors.New("interrupted"))
		return max(status, 1)
	}
	return status
}

// writeSweep prints the sweep's table (not with -json: the results went
// out one per line).
func writeSweep(cfg config, w io.Writer, results []*Result) {
	if cfg.json || len(results) == 0 {
		return
	}
	r0 := results[0]
	open := cfg.Workload
	open.Rate = 1
	fmt.Fprintf(w, "engine %s, %s, %d connections (+%d idle), %d B; open loop, at most %d in flight per connection, latency from each request's due time\n",
		r0.Engine, r0.Addr, r0.Conns, r0.IdleOpen, r0.Bytes, open.depth())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\trate/s\tachieved/s\tp50 us\tp90 us\tp99 us\tp99.9 us\tmax us\tsend lag p99 us\tlate sends\t")
	for _, r := range results {
		rate := "closed"
		if r.Rate > 0 {
			rate = fmt.Sprintf("%.0f", r.Rate)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t\n",
			r.Step, rate, r.RPS, r.P50us, r.P90us, r.P99us, r.P999us, r.MaxUs, r.SendLagP99us, r.LateSends)
	}
	_ = tw.Flush()
	for _, r := range results {
		if r.Problem != "" {
			fmt.Fprintf(w, "step %s FAILED: %s\n", r.Step, r.Problem)
		}
	}
}
