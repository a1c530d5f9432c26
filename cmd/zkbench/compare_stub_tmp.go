package main

import (
	"context"
	"io"
)

func populateMain(ctx context.Context, args []string, stdout, stderr io.Writer) error { return nil }
func compareMain(ctx context.Context, args []string, stdout, stderr io.Writer) error  { return nil }
