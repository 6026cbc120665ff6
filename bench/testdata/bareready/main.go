// Command bareready is the floor BenchmarkBareReady measures: a Go
// program that opens (creating) a SQLite database in a new temporary
// directory, as appkb does, and answers 200 on /healthz. What appkb takes
// beyond this is its own start.
package main

import (
	"database/sql"
	"net/http"
	"os"
	"path/filepath"

	_ "github.com/mattn/go-sqlite3"
)

func main() {
	dir, err := os.MkdirTemp("", "bareready-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "x.db")+"?_journal_mode=WAL&_synchronous=NORMAL")
	if err != nil {
		panic(err)
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY)`); err != nil {
		panic(err)
	}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := db.Ping(); err != nil {
			http.Error(w, err.Error(), 503)
			return
		}
		w.Write([]byte("ok"))
	})
	srv := &http.Server{Addr: os.Args[1]}
	go func() {
		sig := make(chan os.Signal, 1)
		notify(sig)
		<-sig
		srv.Close()
	}()
	_ = srv.ListenAndServe()
}
