// Package textdist measures how far apart two short strings are, for the
// places that forgive a typo: the gatherer's fuzzy experiment lookup and the
// scenario parser's "did you mean" hints. It must not know what the strings
// mean.
package textdist

// Levenshtein is the edit distance between a and b counted in runes: the
// fewest insertions, deletions and substitutions that turn one into the
// other.
func Levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Closest is the candidate nearest to s, if it is fewer than maxDist edits
// away; "" otherwise. Of equally near candidates the first wins.
func Closest(s string, candidates []string, maxDist int) string {
	best, bestD := "", maxDist
	for _, c := range candidates {
		if d := Levenshtein(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
