package node

import "testing"

func TestHistoryLimitIsNeverChangedSilently(t *testing.T) {
	for _, bad := range []int{-1, 1001, 5000} {
		if err := (HistoryParams{Limit: bad}).Validate(); err == nil {
			t.Errorf("limit %d accepted", bad)
		}
	}
	for _, ok := range []int{0, 1, 1000} {
		if err := (HistoryParams{Limit: ok}).Validate(); err != nil {
			t.Errorf("limit %d refused: %v", ok, err)
		}
	}
}
