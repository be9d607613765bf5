package node

import "github.com/gleaner-net/gleaner/ledger"

// checkPayload is the gate this node's store runs on every entry before
// it keeps it (ledger.Store.CheckPayloads): ledger.CheckPayload, which
// owns the schema of every entry type beside the payload types' checks.
func checkPayload(e *ledger.Entry) error { return ledger.CheckPayload(e) }
