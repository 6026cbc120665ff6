// Package adminapi serves the admin API of the test double (/admin/v1):
// importing and replacing apps, keys, knowledge bases, the built-in
// model's scenarios and the request journal. handlers.Server embeds API,
// so its methods are the Admin* operations of the generated strict
// interface.
package adminapi

import (
	"appkb/handlers/journal"
	"appkb/internal/admin"
	"appkb/internal/apps"
	"appkb/internal/llm"
)

// Config configures the test double's side of the server: the admin API,
// the request journal and injected faults. The zero value turns all of it
// off.
type Config struct {
	// Token opens the admin API; empty leaves it off (its routes answer
	// 404).
	Token string
	// Journal records the requests answered outside the admin API; nil
	// keeps none.
	Journal *journal.Journal
	// Scenarios script the built-in chat model; the admin API changes
	// them. nil means none can be set.
	Scenarios *llm.Scenarios
	// Faults honours the X-Appkb-Fault header.
	Faults bool
	// Service does the admin operations; built over the server's stores
	// when nil.
	Service *admin.Service
}

// API implements the admin operations. Its service is nil when the admin
// API is off; journal and scenarios are what it reads and changes (nil
// when off).
type API struct {
	admin     *admin.Service
	journal   *journal.Journal
	scenarios *llm.Scenarios
	// apps finds the app whose scenario is set.
	apps *apps.Store
}

// New builds the admin operations from cfg. The service is cfg.Service,
// or else fallback (the one the wiring built), and only when cfg.Token
// opens the admin API.
func New(cfg Config, fallback *admin.Service, appStore *apps.Store) *API {
	a := &API{journal: cfg.Journal, scenarios: cfg.Scenarios, apps: appStore}
	if cfg.Token != "" {
		a.admin = cfg.Service
		if a.admin == nil {
			a.admin = fallback
		}
	}
	return a
}
