//go:build !unix

package main

import "os"

// termWidth is 0, unknown, where the terminal's size is not asked for.
func termWidth(*os.File) int { return 0 }
