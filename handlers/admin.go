package handlers

import (
	"appkb/handlers/adminapi"
	"appkb/handlers/validation"
)

const adminBasePath = validation.AdminBasePath

// Admin configures the admin API, the request journal and injected faults
// (see adminapi.Config).
type Admin = adminapi.Config
