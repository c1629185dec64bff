package stats

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// MinPerCondition is the smallest number of participants with a value a
// condition needs before its numbers are compared: below it the results
// say "too little data" instead of an interval.
const MinPerCondition = 30

// Level is the confidence level of every interval the results show.
const Level = 0.95

// SRMAlpha is the p-value below which a sample-ratio check warns.
const SRMAlpha = 0.001

// ErrNoData is returned when an interval has nothing to rest on (no
// participants, a zero weight sum, a variance that cannot be estimated).
var ErrNoData = errors.New("not enough data")

// Interval is a two-sided confidence interval.
type Interval struct {
	Low, High float64
}

// zFor is the two-sided normal quantile of a confidence level.
func zFor(level float64) float64 {
	return distuv.UnitNormal.Quantile(1 - (1-level)/2)
}

// Wilson is the Wilson score interval for x successes in n trials
// (without continuity correction).
func Wilson(x, n int, level float64) (Interval, error) {
	if n <= 0 || x < 0 || x > n {
		return Interval{}, ErrNoData
	}
	z := zFor(level)
	fn := float64(n)
	p := float64(x) / fn
	z2 := z * z
	centre := p + z2/(2*fn)
	half := z * math.Sqrt(p*(1-p)/fn+z2/(4*fn*fn))
	den := 1 + z2/fn
	lo, hi := (centre-half)/den, (centre+half)/den
	// The formula is exact at the edges; rounding may leave a hair outside.
	return Interval{Low: math.Max(0, lo), High: math.Min(1, hi)}, nil
}

// ProportionDiff is the difference p2 - p1 of two proportions (x1 of n1,
// x2 of n2) with Newcombe's hybrid score interval (his method 10), built
// from the two Wilson intervals.
func ProportionDiff(x1, n1, x2, n2 int, level float64) (float64, Interval, error) {
	w1, err := Wilson(x1, n1, level)
	if err != nil {
		return 0, Interval{}, err
	}
	w2, err := Wilson(x2, n2, level)
	if err != nil {
		return 0, Interval{}, err
	}
	p1, p2 := float64(x1)/float64(n1), float64(x2)/float64(n2)
	d := p2 - p1
	lo := d - math.Sqrt(sq(p2-w2.Low)+sq(w1.High-p1))
	hi := d + math.Sqrt(sq(w2.High-p2)+sq(p1-w1.Low))
	return d, Interval{Low: lo, High: hi}, nil
}

// Sample is what a mean comparison needs of one group: its mean, its
// sample standard deviation and its size.
type Sample struct {
	Mean, SD float64
	N        int
}

// Mean is Student's t interval for a sample's mean.
func Mean(s Sample, level float64) (Interval, error) {
	if s.N < 2 || s.SD < 0 || math.IsNaN(s.SD) {
		return Interval{}, ErrNoData
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(s.N - 1)}.Quantile(1 - (1-level)/2)
	h := t * s.SD / math.Sqrt(float64(s.N))
	return Interval{Low: s.Mean - h, High: s.Mean + h}, nil
}

// MeanDiff is the difference b.Mean - a.Mean with Welch's interval (no
// equal-variance assumption) and the Welch-Satterthwaite degrees of
// freedom.
func MeanDiff(a, b Sample, level float64) (diff float64, iv Interval, df float64, err error) {
	if a.N < 2 || b.N < 2 || a.SD < 0 || b.SD < 0 || math.IsNaN(a.SD) || math.IsNaN(b.SD) {
		return 0, Interval{}, 0, ErrNoData
	}
	va, vb := sq(a.SD)/float64(a.N), sq(b.SD)/float64(b.N)
	se := math.Sqrt(va + vb)
	diff = b.Mean - a.Mean
	if se == 0 {
		// Both groups constant: the difference is known exactly.
		return diff, Interval{Low: diff, High: diff}, math.Inf(1), nil
	}
	df = sq(va+vb) / (sq(va)/float64(a.N-1) + sq(vb)/float64(b.N-1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-level)/2)
	return diff, Interval{Low: diff - t*se, High: diff + t*se}, df, nil
}

// GoodnessOfFit is a chi-square goodness-of-fit test.
type GoodnessOfFit struct {
	ChiSquare float64
	DF        int
	P         float64
}

// SampleRatio tests observed counts against the shares the weights give
// them. Conditions of weight zero take no part (a count there is a
// mismatch the caller reports by itself); fewer than two conditions with
// weight, or no participants, is ErrNoData.
func SampleRatio(observed []int, weights []float64) (GoodnessOfFit, error) {
	if len(observed) != len(weights) {
		return GoodnessOfFit{}, errors.New("stats: observed and weights differ in length")
	}
	total, wsum := 0, 0.0
	k := 0
	for i, w := range weights {
		if w > 0 {
			total += observed[i]
			wsum += w
			k++
		}
	}
	if k < 2 || total == 0 {
		return GoodnessOfFit{}, ErrNoData
	}
	chi := 0.0
	for i, w := range weights {
		if w <= 0 {
			continue
		}
		exp := float64(total) * w / wsum
		chi += sq(float64(observed[i])-exp) / exp
	}
	df := k - 1
	p := distuv.ChiSquared{K: float64(df)}.Survival(chi)
	return GoodnessOfFit{ChiSquare: chi, DF: df, P: p}, nil
}

func sq(x float64) float64 { return x * x }
