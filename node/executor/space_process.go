//go:build unix

package executor

import "context"

var _ InputSpacer = (*Process)(nil)

// InputSpace is the free space where the jobs' work directories are,
// which the inputs are unpacked into.
func (p *Process) InputSpace(context.Context) (int64, bool, error) {
	free, err := DiskFree(p.root)
	if err != nil {
		return 0, false, err
	}
	return free, true, nil
}
