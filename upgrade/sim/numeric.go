package sim

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
)

// The analysis results of a real server are PostgreSQL numeric values
// written as text: each carries a display scale (digits after the point)
// that follows numeric.c's rules, e.g. avg(10, 17.5) is
// "13.7500000000000000". pgNum keeps a value exactly with its scale, and
// the operations below choose the result scale as PostgreSQL does.

type pgNum struct {
	v     *big.Rat
	scale int
}

// pgMinSigDigits is NUMERIC_MIN_SIG_DIGITS: a quotient shows at least this
// many significant digits.
const pgMinSigDigits = 16

// bigTenThousand is 10000 as a big.Rat (a function: a package-level
// big.NewRat is a call at init).
func bigTenThousand() *big.Rat { return big.NewRat(10000, 1) }

// parsePgNum reads a value as cast(text as decimal) does; false when the
// text is no number.
func parsePgNum(v any) (pgNum, bool) {
	var text string
	switch x := v.(type) {
	case json.Number:
		text = x.String()
	case string:
		text = strings.TrimSpace(x)
	case float64:
		text = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return pgNum{}, false
	}
	lower := strings.ToLower(text)
	if text == "" || strings.Contains(lower, "inf") || strings.Contains(lower, "nan") || strings.HasPrefix(lower, "0x") {
		return pgNum{}, false
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return pgNum{}, false
	}
	mant, exp := lower, 0
	if i := strings.IndexByte(lower, 'e'); i >= 0 {
		mant = lower[:i]
		e, err := strconv.Atoi(lower[i+1:])
		if err != nil {
			return pgNum{}, false
		}
		exp = e
	}
	scale := 0
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		scale = len(mant) - i - 1
	}
	return pgNum{v: r, scale: max(0, scale-exp)}, true
}

func pgInt(n int) pgNum { return pgNum{v: big.NewRat(int64(n), 1), scale: 0} }

// text writes the value with its scale (numeric_out).
func (a pgNum) text() string {
	s := a.v.FloatString(a.scale)
	if strings.HasPrefix(s, "-") && strings.Trim(s[1:], "0.") == "" {
		s = s[1:]
	}
	return s
}

// float is the value as a double (for percentile_cont).
func (a pgNum) float() float64 {
	f, _ := a.v.Float64()
	return f
}

// round keeps scale digits, halves away from zero (round_var).
func round(r *big.Rat, scale int) pgNum {
	v, _ := new(big.Rat).SetString(r.FloatString(scale))
	return pgNum{v: v, scale: scale}
}

func pgAdd(a, b pgNum) pgNum {
	return pgNum{v: new(big.Rat).Add(a.v, b.v), scale: max(a.scale, b.scale)}
}

func pgMul(a, b pgNum) pgNum {
	return pgNum{v: new(big.Rat).Mul(a.v, b.v), scale: a.scale + b.scale}
}

// firstDigit is a value's weight and first digit in base 10000, as
// select_div_scale reads them.
func firstDigit(r *big.Rat) (weight int, digit int64) {
	a := new(big.Rat).Abs(r)
	if a.Sign() == 0 {
		return 0, 0
	}
	unit := big.NewRat(1, 1)
	if a.Cmp(unit) >= 0 {
		for next := new(big.Rat).Mul(unit, bigTenThousand()); a.Cmp(next) >= 0; next = new(big.Rat).Mul(unit, bigTenThousand()) {
			unit = next
			weight++
		}
	} else {
		for a.Cmp(unit) < 0 {
			unit = new(big.Rat).Quo(unit, bigTenThousand())
			weight--
		}
	}
	q := new(big.Rat).Quo(a, unit)
	d := new(big.Int).Quo(q.Num(), q.Denom())
	return weight, d.Int64()
}

// divScale is select_div_scale.
func divScale(a, b pgNum) int {
	w1, d1 := firstDigit(a.v)
	w2, d2 := firstDigit(b.v)
	qweight := w1 - w2
	if d1 <= d2 {
		qweight--
	}
	return min(max(pgMinSigDigits-qweight*4, a.scale, b.scale, 0), 1000)
}

// pgDiv is numeric division (b is not zero).
func pgDiv(a, b pgNum) pgNum {
	return round(new(big.Rat).Quo(a.v, b.v), divScale(a, b))
}

// pgAvg is avg(numeric): the sum over the count.
func pgAvg(v []pgNum) pgNum {
	return pgDiv(pgSum(v), pgInt(len(v)))
}

func pgSum(v []pgNum) pgNum {
	sum := pgNum{v: new(big.Rat), scale: 0}
	for _, x := range v {
		sum = pgAdd(sum, x)
	}
	return sum
}

// pgStddev is stddev_samp(numeric) (numeric_stddev_internal); false for
// fewer than two values (null).
func pgStddev(v []pgNum) (pgNum, bool) {
	if len(v) < 2 {
		return pgNum{}, false
	}
	sumX := pgSum(v)
	sumX2 := pgNum{v: new(big.Rat), scale: 0}
	for _, x := range v {
		sumX2 = pgAdd(sumX2, pgMul(x, x))
	}
	n := pgInt(len(v))
	rscale := sumX.scale * 2
	num := new(big.Rat).Sub(new(big.Rat).Mul(n.v, sumX2.v), new(big.Rat).Mul(sumX.v, sumX.v))
	numer := round(num, rscale)
	if numer.v.Sign() <= 0 {
		return pgNum{v: new(big.Rat), scale: 0}, true
	}
	den := pgInt(len(v) * (len(v) - 1))
	scale := divScale(numer, den)
	variance := round(new(big.Rat).Quo(numer.v, den.v), scale)
	return pgSqrt(variance.v, scale), true
}

// pgSqrt is the square root rounded to scale digits.
func pgSqrt(r *big.Rat, scale int) pgNum {
	// isqrt(r * 10^(2*(scale+1))) gives scale+1 exact digits; the last
	// one rounds.
	shift := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(2*(scale+1))), nil)
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(shift))
	i := new(big.Int).Quo(x.Num(), x.Denom())
	root := new(big.Int).Sqrt(i)
	q := new(big.Rat).SetFrac(root, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale+1)), nil))
	return round(q, scale)
}
