// Package logging builds the zerolog loggers of rocketkv's binaries:
// human-readable console output on a terminal, one JSON object per line
// otherwise (for log shippers), at a configurable level.
package logging

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
)

// Format selects the output encoding.
type Format string

// Output formats.
const (
	// Auto picks Console when the writer is a terminal, JSON otherwise.
	Auto Format = "auto"
	// Console writes coloured, aligned lines for people.
	Console Format = "console"
	// JSON writes one object per line.
	JSON Format = "json"
)

// New returns a logger writing to w at the given level ("trace", "debug",
// "info", "warn", "error") in the given format. Every line carries a
// timestamp; component loggers add their own "component" field with With.
func New(w io.Writer, level string, format Format) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("log level %q: want trace, debug, info, warn or error", level)
	}
	switch format {
	case Auto:
		if f, ok := w.(*os.File); ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
			format = Console
		} else {
			format = JSON
		}
	case Console, JSON:
	default:
		return zerolog.Nop(), fmt.Errorf("log format %q: want auto, console or json", format)
	}
	if format == Console {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.DateTime + ".000"}
	}
	return zerolog.New(w).Level(lvl).Hook(millisecondTime{}), nil
}

// timeLayout is the layout of every line's "time" field: RFC 3339 with
// milliseconds, as RocketMQ's logs carry them (zerolog's default layout
// stops at the second, too coarse to order a failover's steps across a
// broker, its slave and a controller).
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// millisecondTime adds the "time" field to every line written. It is a hook
// rather than zerolog.TimeFieldFormat, which is global to the process.
type millisecondTime struct{}

// Run implements zerolog.Hook.
func (millisecondTime) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().Format(timeLayout))
}

// IgnoredKeys reports the keys of a configuration file, and of the
// overrides given with it, that change nothing: a warning for each unknown
// key of the file, one info line for each RocketMQ key accepted without
// effect (with its reason), and a warning instead when such a key's value
// asks for something rocketkv does not do. A key from an override is
// logged with source=override instead of the file's name.
func IgnoredKeys(log zerolog.Logger, file string, unknown []string, inert []configs.InertKey) {
	for _, k := range unknown {
		log.Warn().Str("key", k).Str("file", file).Msg("unknown configuration key ignored")
	}
	for _, k := range inert {
		ev, msg := log.Warn(), k.Warning
		if k.Warning == "" {
			ev, msg = log.Info().Str("value", k.Value), "no effect in rocketkv: "+k.Reason
		}
		if k.Override {
			ev = ev.Str("source", "override")
		} else {
			ev = ev.Str("file", file)
		}
		ev.Str("key", k.Key).Msg(msg)
	}
}

// PrintConfig writes settings as the key=value lines a -p flag prints to
// w, and to warnings (as format) the keys of file a start would warn of,
// unknown or inert: -p is how a file is checked before a start.
func PrintConfig(w, warnings io.Writer, format Format, file string, unknown []string, inert []configs.InertKey, settings map[string]string) error {
	log, err := New(warnings, "warn", format)
	if err != nil {
		return err
	}
	IgnoredKeys(log, file, unknown, inert)
	if _, err := w.Write(configs.PropertiesText(settings)); err != nil {
		return fmt.Errorf("print the configuration: %w", err)
	}
	return nil
}
