package main

import (
	"os"
	"os/signal"
)

func notify(c chan os.Signal) { signal.Notify(c, os.Interrupt) }
