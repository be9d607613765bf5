package auction

import (
	"fmt"
	"strings"
)

// Suggest returns the candidate that s is most likely a typo of, or ""
// when none is close: an error can then say "did you mean X?" instead of
// only listing what is valid. Comparison ignores case. Close means at most
// one edit for words of up to four letters and two for longer ones, where
// an edit inserts, deletes or replaces a letter or swaps two neighbours
// (testent -> testnet is one). Ties go to the earlier candidate, so
// callers list their candidates most common first.
func Suggest(s string, candidates []string) string {
	s = strings.ToLower(s)
	limit := 1
	if len([]rune(s)) > 4 {
		limit = 2
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := editDistance(s, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// DidYouMean is Suggest as a phrase to end an error with: `; did you mean
// "X"?`, or "" when nothing is close.
func DidYouMean(s string, candidates []string) string {
	if m := Suggest(s, candidates); m != "" {
		return fmt.Sprintf("; did you mean %q?", m)
	}
	return ""
}

// editDistance is the optimal-string-alignment distance: Levenshtein plus
// the swap of two adjacent letters, the commonest typing slip.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows suffice: the swap looks two rows back.
	prev2 := make([]int, len(rb)+1)
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
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
