package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// The charts are SVG drawn here, inline in the page: no script, no image
// requests, and the page's CSP allows nothing else.

const chartW, chartH = 560.0, 120.0

// spark draws one series as a line over its own scale, with its latest
// value: one small chart per state, so a few in flight are not flattened
// by millions completed.
func spark(title string, at []time.Time, vs []int64, class string) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="%s">`, chartW, chartH/2, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="0" y="12" class="label">%s</text>`, template.HTMLEscapeString(title))
	if len(vs) == 0 {
		b.WriteString(`<text x="0" y="40" class="muted">no samples yet</text></svg>`)
		return template.HTML(b.String())
	}
	top := int64(1)
	for _, v := range vs {
		top = max(top, v)
	}
	fmt.Fprintf(&b, `<text x="%g" y="12" class="value" text-anchor="end">%d now · max %d</text>`, chartW, vs[len(vs)-1], top)
	h, y0 := chartH/2-22, chartH/2-4
	step := chartW / float64(max(len(vs)-1, 1))
	var pts []string
	for i, v := range vs {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", float64(i)*step, y0-h*float64(v)/float64(top)))
	}
	if len(pts) == 1 {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", chartW, y0-h*float64(vs[0])/float64(top)))
	}
	fmt.Fprintf(&b, `<line x1="0" y1="%g" x2="%g" y2="%g" class="axis"/>`, y0, chartW, y0)
	fmt.Fprintf(&b, `<polyline points="%s" class="line %s"/>`, strings.Join(pts, " "), class)
	fmt.Fprintf(&b, `<title>%s: %s to %s</title></svg>`, template.HTMLEscapeString(title),
		at[0].Format("15:04:05"), at[len(at)-1].Format("15:04:05"))
	return template.HTML(b.String())
}

// bar is one bar of a bar chart.
type bar struct {
	Label string  // under the bar, when there is room
	Title string  // its tooltip
	V     float64 // its height, from 0 to the chart's top
}

// bars draws a bar chart whose scale tops at top.
func bars(title, unit string, bs []bar, top float64) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="%s">`, chartW, chartH, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="0" y="12" class="label">%s</text>`, template.HTMLEscapeString(title))
	if len(bs) == 0 {
		b.WriteString(`<text x="0" y="60" class="muted">nothing yet</text></svg>`)
		return template.HTML(b.String())
	}
	if top <= 0 {
		top = 1
	}
	fmt.Fprintf(&b, `<text x="%g" y="12" class="value" text-anchor="end">scale 0–%s%s</text>`, chartW, trimFloat(top), unit)
	h, y0 := chartH-40, chartH-18
	w := chartW / float64(len(bs))
	every := max(1, len(bs)/8)
	for i, x := range bs {
		bh := h * min(x.V, top) / top
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="bar"><title>%s</title></rect>`,
			float64(i)*w+1, y0-bh, max(w-2, 1), bh, template.HTMLEscapeString(x.Title))
		if i%every == 0 && x.Label != "" {
			fmt.Fprintf(&b, `<text x="%.1f" y="%g" class="tick">%s</text>`, float64(i)*w+1, chartH-4, template.HTMLEscapeString(x.Label))
		}
	}
	fmt.Fprintf(&b, `<line x1="0" y1="%g" x2="%g" y2="%g" class="axis"/></svg>`, y0, chartW, y0)
	return template.HTML(b.String())
}

func trimFloat(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f), "0"), ".")
}

// stateCharts draws the states over time, one line each.
func stateCharts(samples []sample) []template.HTML {
	at := make([]time.Time, len(samples))
	series := map[string][]int64{}
	for i, s := range samples {
		at[i] = s.At
		series["in flight"] = append(series["in flight"], s.Processing)
		series["unfinished"] = append(series["unfinished"], s.Unfinished)
		series["failed"] = append(series["failed"], s.Failed)
		series["completed"] = append(series["completed"], s.Completed)
	}
	return []template.HTML{
		spark("in flight", at, series["in flight"], "processing"),
		spark("unfinished", at, series["unfinished"], "unfinished"),
		spark("failed", at, series["failed"], "failed"),
		spark("completed", at, series["completed"], "completed"),
	}
}

// replayChart draws the share of answers that were replays, per minute.
func replayChart(ms []minute) template.HTML {
	bs := make([]bar, len(ms))
	for i, m := range ms {
		ratio := float64(m.Replayed) / float64(max(m.Replayed+m.Executed, 1))
		bs[i] = bar{Label: m.At.Format("15:04"), V: ratio * 100,
			Title: fmt.Sprintf("%s: %d replayed, %d executed (%.0f%% replays)", m.At.Format("15:04"), m.Replayed, m.Executed, ratio*100)}
	}
	return bars("Replay ratio per minute", "%", bs, 100)
}

// unknownChart draws the records whose outcome is unknown or that are
// unfinished, by the hour they were created in, over the last day.
func unknownChart(created []time.Time, now time.Time) template.HTML {
	end := now.UTC().Truncate(time.Hour)
	counts := make([]int, 24)
	for _, t := range created {
		if i := 23 - int(end.Sub(t.UTC().Truncate(time.Hour))/time.Hour); i >= 0 && i < 24 {
			counts[i]++
		}
	}
	bs := make([]bar, 24)
	top := 1
	for i, n := range counts {
		h := end.Add(time.Duration(i-23) * time.Hour)
		bs[i] = bar{Label: h.Format("15h"), V: float64(n), Title: fmt.Sprintf("%s UTC: %d", h.Format("Jan 2 15:04"), n)}
		top = max(top, n)
	}
	return bars("Unknown outcomes and unfinished operations per hour (UTC, last 24 h)", "", bs, float64(top))
}
