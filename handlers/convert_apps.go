package handlers

import (
	"appkb/gen"
	"appkb/internal/apps"
)

// Apps, domain → wire.

func wireAppInfo(i apps.AppInfo) gen.AppInfoResponse {
	return gen.AppInfoResponse{Name: i.Name, Description: &i.Description, Tags: listOrNil(i.Tags), Mode: i.Mode, AuthorName: i.AuthorName}
}
