package bench

import (
	"image/color"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var (
	barColor   = color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff}
	p99Color   = color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff}
	roundColor = color.RGBA{A: 0xff}
)

// charts saves NAME-throughput.png (median req/s per variant, each round a
// dot) and NAME-latency.png (median p50 and p99 per variant).
func (rep *Report) charts(dir, name string) error {
	n := len(rep.Rows)
	if n == 0 {
		return nil
	}
	// Horizontal bars, the first variant on top.
	labels := make([]string, n)
	rps := make(plotter.Values, n)
	p50 := make(plotter.Values, n)
	p99 := make(plotter.Values, n)
	var dots plotter.XYs
	for i, r := range rep.Rows {
		y := n - 1 - i
		labels[y] = r.Variant
		rps[y], p50[y], p99[y] = r.RPS, r.P50, r.P99
		for _, s := range rep.Samples {
			if s.Variant == r.Variant {
				dots = append(dots, plotter.XY{X: s.RPS, Y: float64(y)})
			}
		}
	}
	height := vg.Length(n)*0.45*vg.Inch + 1.3*vg.Inch

	p := plot.New()
	p.Title.Text = "Throughput: median req/s over the rounds (dots: each round)"
	p.X.Label.Text = "requests per second"
	p.X.Min = 0
	bars, err := plotter.NewBarChart(rps, 0.3*vg.Inch)
	if err != nil {
		return err
	}
	bars.Horizontal, bars.Color, bars.LineStyle.Width = true, barColor, 0
	sc, err := plotter.NewScatter(dots)
	if err != nil {
		return err
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: roundColor, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
	p.X.Tick.Marker = wholeTicks{}
	p.X.Max = maxOf(rps, dots) * 1.05
	p.Add(bars, sc, plotter.NewGrid())
	p.NominalY(labels...)
	if err := p.Save(8*vg.Inch, height, filepath.Join(dir, name+"-throughput.png")); err != nil {
		return err
	}

	l := plot.New()
	l.Title.Text = "Latency: median over the rounds of each round's p50 and p99"
	l.X.Label.Text = "milliseconds"
	l.X.Min = 0
	w := 0.18 * vg.Inch
	b50, err := plotter.NewBarChart(p50, w)
	if err != nil {
		return err
	}
	b50.Horizontal, b50.Color, b50.LineStyle.Width, b50.Offset = true, barColor, 0, w/2
	b99, err := plotter.NewBarChart(p99, w)
	if err != nil {
		return err
	}
	b99.Horizontal, b99.Color, b99.LineStyle.Width, b99.Offset = true, p99Color, 0, -w/2
	l.Add(b50, b99, plotter.NewGrid())
	l.Legend.Add("p50", b50)
	l.Legend.Add("p99", b99)
	l.Legend.Top = true
	l.Legend.YOffs = -vg.Points(14) // below the title
	l.X.Tick.Marker = wholeTicks{}
	l.X.Max = maxOf(p99, nil) * 1.2 // room for the legend
	l.NominalY(labels...)
	return l.Save(8*vg.Inch, height, filepath.Join(dir, name+"-latency.png"))
}

func maxOf(vs plotter.Values, xys plotter.XYs) float64 {
	m := 0.0
	for _, v := range vs {
		m = max(m, v)
	}
	for _, xy := range xys {
		m = max(m, xy.X)
	}
	return m
}

// wholeTicks are gonum's default ticks labelled without decimals.
type wholeTicks struct{}

func (wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}
