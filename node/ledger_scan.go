package node

import "github.com/gleaner-net/gleaner/ledger"

// scanLedger calls fn with every stored entry of every feed, saying whether
// its author's feed is frozen by a fraud proof. Entries were verified when
// they were appended; nothing is checked again here.
func scanLedger(st *ledger.Store, fn func(e *ledger.Entry, se *ledger.SignedEntry, frozen bool)) error {
	heads, err := st.Heads()
	if err != nil {
		return err
	}
	for _, h := range heads {
		_, frozen := st.Frozen(h.Author)
		err := st.Walk(h.Author, 1, h.Seq, func(e *ledger.Entry, se *ledger.SignedEntry) error {
			fn(e, se, frozen)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
