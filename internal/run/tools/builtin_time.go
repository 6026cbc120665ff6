package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the time tools accept any IANA zone, even without system zone files

	"appkb/internal/platform/jsonnum"
	"appkb/internal/run/tools/strftime"
)

// Now is the clock of the time tools; tests replace it.
var Now = time.Now

// ---- time ----

// loadZone reads an IANA zone name; empty means UTC.
func loadZone(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	if name == "" || strings.EqualFold(name, "UTC") {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown timezone %q", name)
	}
	return loc, nil
}

var toolCurrentTime = &Tool{
	Provider: "time", Name: "current_time",
	Description: "Gives the current date and time.",
	Params: []Param{
		{Name: "format", Type: paramString, Default: "%Y-%m-%d %H:%M:%S", Description: "Layout in strftime notation."},
		{Name: "timezone", Type: paramString, Default: "UTC", Description: "IANA timezone, such as Europe/Berlin."},
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		loc, err := loadZone(str(args, "timezone"))
		if err != nil {
			return nil, err
		}
		return textOut(strftime.Format(Now().In(loc), str(args, "format"))), nil
	},
}

var toolWeekday = &Tool{
	Provider: "time", Name: "weekday",
	Description: "Tells the day of the week of a date.",
	Params: []Param{
		{Name: "year", Type: paramNumber, LLM: true, Description: "Year; the current year when left out."},
		{Name: "month", Type: paramNumber, Required: true, LLM: true, Description: "Month, 1 to 12."},
		{Name: "day", Type: paramNumber, Required: true, LLM: true, Description: "Day of the month, 1 to 31."},
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		y, ok := num(args, "year")
		if !ok {
			y = float64(Now().Year())
		}
		m, _ := num(args, "month")
		d, _ := num(args, "day")
		t := time.Date(int(y), time.Month(int(m)), int(d), 0, 0, 0, 0, time.UTC)
		if y < 1 || m < 1 || m > 12 || d < 1 || t.Day() != int(d) {
			return nil, fmt.Errorf("%s-%s-%s is not a date", jsonnum.Format(y), jsonnum.Format(m), jsonnum.Format(d))
		}
		return textOut(fmt.Sprintf("%s %d, %d is %s.", t.Month(), t.Day(), t.Year(), t.Weekday())), nil
	},
}

// localLayouts are the layouts a local time may be written in.
var localLayouts = []string{"2006-1-2 15:4:5", "2006-1-2 15:4", "2006-1-2T15:4:5", "2006-1-2", time.RFC3339}

func parseLocal(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, l := range localLayouts {
		if t, err := time.ParseInLocation(l, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time of the form 2024-01-31 13:45:00", s)
}

var toolTimezoneConversion = &Tool{
	Provider: "time", Name: "timezone_conversion",
	Description: "Converts a time from one timezone to another.",
	Params: []Param{
		{Name: "current_time", Type: paramString, Required: true, LLM: true, Description: "The time to convert, such as 2024-01-31 13:45:00."},
		{Name: "current_timezone", Type: paramString, Required: true, LLM: true, Default: "UTC", Description: "IANA timezone of that time."},
		{Name: "target_timezone", Type: paramString, Required: true, LLM: true, Default: "UTC", Description: "IANA timezone to convert to."},
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		from, err := loadZone(str(args, "current_timezone"))
		if err != nil {
			return nil, err
		}
		to, err := loadZone(str(args, "target_timezone"))
		if err != nil {
			return nil, err
		}
		t, err := parseLocal(str(args, "current_time"), from)
		if err != nil {
			return nil, err
		}
		return textOut(t.In(to).Format("2006-01-02 15:04:05")), nil
	},
}

var toolTimestampToLocal = &Tool{
	Provider: "time", Name: "timestamp_to_localtime",
	Description: "Turns a Unix timestamp into a local time.",
	Params: []Param{
		{Name: "timestamp", Type: paramNumber, Required: true, LLM: true, Description: "Seconds since 1970-01-01 UTC."},
		{Name: "timezone", Type: paramString, LLM: true, Default: "UTC", Description: "IANA timezone of the result."},
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		loc, err := loadZone(str(args, "timezone"))
		if err != nil {
			return nil, err
		}
		ts, _ := num(args, "timestamp")
		return textOut(time.Unix(int64(ts), 0).In(loc).Format("2006-01-02 15:04:05")), nil
	},
}

var toolLocalToTimestamp = &Tool{
	Provider: "time", Name: "localtime_to_timestamp",
	Description: "Turns a local time into a Unix timestamp.",
	Params: []Param{
		{Name: "localtime", Type: paramString, Required: true, LLM: true, Description: "The time, such as 2024-01-31 13:45:00."},
		{Name: "timezone", Type: paramString, LLM: true, Default: "UTC", Description: "IANA timezone of that time."},
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		loc, err := loadZone(str(args, "timezone"))
		if err != nil {
			return nil, err
		}
		t, err := parseLocal(str(args, "localtime"), loc)
		if err != nil {
			return nil, err
		}
		return textOut(strconv.FormatInt(t.Unix(), 10)), nil
	},
}

// strftime formats t with the C/Python directives. Unknown directives are
