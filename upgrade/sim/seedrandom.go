package sim

import "unicode/utf16"

// seedRandom is the first number of seedrandom 3.0.5's default generator
// (ARC4) seeded with a string: the draw UpGrade makes for a condition. It
// follows the published algorithm step for step, in float64 like
// JavaScript, so the same seed gives the same number on both sides.
//
// The key is the seed's UTF-16 code units mixed as seedrandom's mixkey does;
// the generator drops the first 256 bytes of the stream, then takes six
// bytes and adds more until 52 bits of significance are reached.
func seedRandom(seed string) float64 {
	g := newARC4(mixKey(seed))
	const (
		width        = 256.0
		startDenom   = width * width * width * width * width * width // 256^6
		significance = 1 << 52
		overflow     = 1 << 53
	)
	n := g.next(6)
	d := float64(startDenom)
	x := 0.0
	for n < significance {
		n = (n + x) * width
		d *= width
		x = g.next(1)
	}
	for n >= overflow {
		n /= 2
		d /= 2
		x = float64(uint32(x) >> 1)
	}
	return (n + x) / d
}

// mixKey folds the seed's characters into a key of at most 256 bytes.
func mixKey(seed string) []int {
	units := utf16.Encode([]rune(seed))
	var key []int
	smear := int32(0)
	for j, c := range units {
		at := j & 255
		prev := 0
		if at < len(key) {
			prev = key[at]
		}
		// JavaScript: undefined * 19 is NaN, and NaN ^ smear is smear.
		smear ^= int32(prev * 19)
		v := int((int64(smear) + int64(c)) & 255)
		if at < len(key) {
			key[at] = v
		} else {
			key = append(key, v)
		}
	}
	return key
}

type arc4 struct {
	i, j int
	s    [256]int
}

func newARC4(key []int) *arc4 {
	if len(key) == 0 {
		key = []int{0}
	}
	g := &arc4{}
	for i := range g.s {
		g.s[i] = i
	}
	j := 0
	for i := 0; i < 256; i++ {
		t := g.s[i]
		j = (j + key[i%len(key)] + t) & 255
		g.s[i] = g.s[j]
		g.s[j] = t
	}
	g.next(256) // RC4-drop[256]
	return g
}

// next returns the next count bytes of the stream as one big-endian number.
func (g *arc4) next(count int) float64 {
	r := 0.0
	i, j := g.i, g.j
	for ; count > 0; count-- {
		i = (i + 1) & 255
		t := g.s[i]
		j = (j + t) & 255
		g.s[i] = g.s[j]
		g.s[j] = t
		r = r*256 + float64(g.s[(g.s[i]+g.s[j])&255])
	}
	g.i, g.j = i, j
	return r
}
