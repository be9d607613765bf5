package p2p

// ShortID abbreviates a peer ID for a table or a line of text: the
// first 8 and last 6 characters.
func ShortID(id string) string {
	if len(id) > 16 {
		return id[:8] + "…" + id[len(id)-6:]
	}
	return id
}
