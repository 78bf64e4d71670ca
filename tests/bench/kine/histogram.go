package main

import (
	"math"
	"sync/atomic"
)

// histogram: tests/bench/latency_histogram.h's axis (2,000 log bins from
// 1 us to 1e8 us, plus underflow and overflow) and quantile (the upper edge
// of the bin where the cumulative count reaches q), safe for concurrent add.
// Under 2^21 us a value is first truncated to whole microseconds, as
// fanout_client does, so both clients' figures read alike.
type histogram struct {
	bins [histBins + 2]atomic.Uint64
}

const (
	histBins = 2000
	histMin  = 1.0
	histMax  = 1e8
)

var histLogSpan = math.Log(histMax / histMin)

func (h *histogram) add(us float64) {
	if us < 1 {
		us = 1
	} else if us < 1<<21 {
		us = math.Floor(us)
	}
	i := histBins + 1
	if us < histMax {
		i = 1 + int(math.Log(us/histMin)/histLogSpan*histBins)
		i = min(i, histBins)
	}
	h.bins[i].Add(1)
}

func (h *histogram) quantile(q float64) float64 {
	var counts [histBins + 2]uint64
	var total uint64
	for i := range h.bins {
		counts[i] = h.bins[i].Load()
		total += counts[i]
	}
	if total == 0 {
		return 0
	}
	var seen uint64
	for i, c := range counts {
		seen += c
		if float64(seen) >= q*float64(total) {
			switch i {
			case 0:
				return histMin
			case histBins + 1:
				return math.Inf(1)
			default:
				return histMin * math.Exp(float64(i)/histBins*histLogSpan)
			}
		}
	}
	return 0
}
