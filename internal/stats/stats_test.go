package stats

import (
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6f, want %.6f (±%g)", what, got, want, tol)
	}
}

// Wilson intervals of Newcombe (1998), "Two-sided confidence intervals for
// the single proportion", Statistics in Medicine 17:857-872, Table I
// (method 3, score without continuity correction).
func TestWilsonPublished(t *testing.T) {
	for _, tc := range []struct {
		x, n      int
		low, high float64
	}{
		{81, 263, 0.2553, 0.3662},
		{15, 148, 0.0624, 0.1605},
		{0, 20, 0, 0.1611},
		{1, 29, 0.0061, 0.1718},
	} {
		iv, err := Wilson(tc.x, tc.n, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "low", iv.Low, tc.low, 0.00006)
		near(t, "high", iv.High, tc.high, 0.00006)
	}
}

// Differences of proportions of Newcombe (1998), "Interval estimation for
// the difference between independent proportions", Statistics in Medicine
// 17:873-890, Table II (method 10, hybrid score). The table gives p1 - p2;
// ProportionDiff gives the second minus the first, so the groups are
// passed the other way round.
func TestProportionDiffPublished(t *testing.T) {
	for _, tc := range []struct {
		x1, n1, x2, n2 int
		d, low, high   float64
	}{
		{56, 70, 48, 80, 0.2, 0.0524, 0.3339},
		{9, 10, 3, 10, 0.6, 0.1705, 0.8090},
		{6, 7, 2, 7, 0.5714, 0.0582, 0.8062},
		{5, 56, 0, 29, 0.0893, -0.0381, 0.1926},
	} {
		d, iv, err := ProportionDiff(tc.x2, tc.n2, tc.x1, tc.n1, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "diff", d, tc.d, 0.00006)
		near(t, "low", iv.Low, tc.low, 0.00006)
		near(t, "high", iv.High, tc.high, 0.00006)
	}
}

func TestProportionEdges(t *testing.T) {
	if _, err := Wilson(0, 0, 0.95); !errors.Is(err, ErrNoData) {
		t.Errorf("n = 0: %v, want ErrNoData", err)
	}
	if _, err := Wilson(5, 4, 0.95); !errors.Is(err, ErrNoData) {
		t.Errorf("x > n: %v, want ErrNoData", err)
	}
	iv, _ := Wilson(20, 20, 0.95)
	if iv.High != 1 || iv.Low <= 0.8 {
		t.Errorf("20/20: %+v", iv)
	}
	if _, _, err := ProportionDiff(1, 10, 0, 0, 0.95); !errors.Is(err, ErrNoData) {
		t.Errorf("empty second group: %v", err)
	}
}

// The two samples of Welch's t-test example 1 on Wikipedia ("Welch's
// t-test", Examples): t = -2.46, Welch-Satterthwaite df = 24.99 (p = 0.021).
func TestMeanDiffWelchExample(t *testing.T) {
	a1 := []float64{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4}
	a2 := []float64{27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4}
	sa := Sample{Mean: stat.Mean(a1, nil), SD: stat.StdDev(a1, nil), N: len(a1)}
	sb := Sample{Mean: stat.Mean(a2, nil), SD: stat.StdDev(a2, nil), N: len(a2)}
	d, iv, df, err := MeanDiff(sb, sa, 0.95) // A1 - A2, as the example
	if err != nil {
		t.Fatal(err)
	}
	near(t, "df", df, 24.99, 0.01)
	se := math.Sqrt(sa.SD*sa.SD/15 + sb.SD*sb.SD/15)
	near(t, "t", d/se, -2.46, 0.005)
	// p = 0.021 < 0.05: the 95% interval leaves 0 out, the 98% one not.
	if iv.High >= 0 {
		t.Errorf("95%% interval %+v should exclude 0", iv)
	}
	if _, iv98, _, _ := MeanDiff(sb, sa, 0.98); iv98.High <= 0 {
		t.Errorf("98%% interval %+v should include 0", iv98)
	}
	// Half-width against the printed t table: t(0.975, 25) = 2.060.
	near(t, "half-width / se", (iv.High-iv.Low)/2/se, 2.060, 0.001)
}

func TestMeanDiffEdges(t *testing.T) {
	if _, _, _, err := MeanDiff(Sample{Mean: 1, SD: 1, N: 1}, Sample{Mean: 1, SD: 1, N: 40}, 0.95); !errors.Is(err, ErrNoData) {
		t.Errorf("n = 1: %v", err)
	}
	d, iv, _, err := MeanDiff(Sample{Mean: 2, N: 40}, Sample{Mean: 3, N: 40}, 0.95)
	if err != nil || d != 1 || iv.Low != 1 || iv.High != 1 {
		t.Errorf("constant groups: %v %+v %v", d, iv, err)
	}
}

// Critical values of printed tables: P(chi2_1 >= 3.841) = 0.05,
// P(chi2_1 >= 10.828) = 0.001, P(chi2_2 >= 13.816) = 0.001; z(0.975) =
// 1.960; t(0.975, 10) = 2.228, t(0.975, 30) = 2.042.
func TestDistributionsAgainstTables(t *testing.T) {
	near(t, "chi2_1 3.841", distuv.ChiSquared{K: 1}.Survival(3.841), 0.05, 0.00005)
	near(t, "chi2_1 10.828", distuv.ChiSquared{K: 1}.Survival(10.828), 0.001, 0.000001)
	near(t, "chi2_2 13.816", distuv.ChiSquared{K: 2}.Survival(13.816), 0.001, 0.000001)
	near(t, "z", zFor(0.95), 1.960, 0.0005)
	near(t, "t10", distuv.StudentsT{Sigma: 1, Nu: 10}.Quantile(0.975), 2.228, 0.0005)
	near(t, "t30", distuv.StudentsT{Sigma: 1, Nu: 30}.Quantile(0.975), 2.042, 0.0005)
}

func TestSampleRatio(t *testing.T) {
	// 86 / 114 against 50/50: chi2 = 3.92, df 1.
	g, err := SampleRatio([]int{86, 114}, []float64{50, 50})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "chi2", g.ChiSquare, 3.92, 1e-9)
	near(t, "p", g.P, 0.047715, 0.000001)
	if g.DF != 1 {
		t.Errorf("df %d", g.DF)
	}
	// 400 / 600 against 50/50: chi2 = 40, p far below 0.001.
	g, _ = SampleRatio([]int{400, 600}, []float64{50, 50})
	if g.P >= SRMAlpha {
		t.Errorf("400/600: p = %g, want < %g", g.P, SRMAlpha)
	}
	// Weights need not add up to 100; a zero weight takes no part.
	g, _ = SampleRatio([]int{30, 70, 5}, []float64{3, 7, 0})
	if g.ChiSquare != 0 || g.DF != 1 || g.P != 1 {
		t.Errorf("exact split: %+v", g)
	}
	for _, bad := range [][2]any{
		{[]int{0, 0}, []float64{50, 50}},
		{[]int{10, 0}, []float64{100, 0}},
	} {
		if _, err := SampleRatio(bad[0].([]int), bad[1].([]float64)); !errors.Is(err, ErrNoData) {
			t.Errorf("%v: %v, want ErrNoData", bad, err)
		}
	}
	if _, err := SampleRatio([]int{1}, []float64{1, 2}); err == nil {
		t.Error("length mismatch accepted")
	}
}

// Mean of 10 values with sd 2 and mean 5: 5 ± t(0.975, 9) 2/sqrt(10),
// t(0.975, 9) = 2.262 in the printed table.
func TestMeanInterval(t *testing.T) {
	iv, err := Mean(Sample{Mean: 5, SD: 2, N: 10}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "half-width", (iv.High-iv.Low)/2, 2.262*2/math.Sqrt(10), 0.0005)
	if _, err := Mean(Sample{Mean: 5, SD: 2, N: 1}, 0.95); !errors.Is(err, ErrNoData) {
		t.Errorf("n = 1: %v", err)
	}
}
