// Package cliflags turns the command-line flags the binaries share into
// configuration overrides: --set key=value, a --listen address and the
// flags that each stand for one configuration key.
package cliflags

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rocketkv/rocketkv/configs"
)

// AddSets adds each "key=value" of sets to overrides: a key already there
// is left alone (a dedicated flag wins over --set), and of two sets of one
// key the later wins. A set without '=' or with an empty key is an error
// quoting it.
func AddSets(sets []string, overrides map[string]string) error {
	fromSets := map[string]bool{}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--set %q: want key=value", kv)
		}
		if _, flag := overrides[k]; flag && !fromSets[k] {
			continue
		}
		overrides[k], fromSets[k] = v, true
	}
	return nil
}

// AddListen splits a --listen address into the bind address key (0.0.0.0
// when the host is empty, as in ":9876") and the port key.
func AddListen(listen, bindKey, portKey string, overrides map[string]string) error {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	overrides[bindKey], overrides[portKey] = host, port
	return nil
}

// Listen names the keys a --listen flag sets: the bind address and the
// port. The zero value means the command has no --listen.
type Listen struct{ BindKey, PortKey string }

// KeyFlag is a flag that stands for one configuration key; its value, as
// the flag prints it, is the key's.
type KeyFlag struct{ Flag, Key string }

// Overrides returns the settings the command line gives, each named for
// the errors in it (configs.Source): --set's values first, then --listen
// and each flag of keys that was given, as sources of their own after it,
// so that they win over --set. A source is named after its flag, with
// the short form when it has one ("flag -n (--namesrv)").
func Overrides(f *pflag.FlagSet, sets []string, listen Listen, keys ...KeyFlag) ([]configs.Source, error) {
	setValues := map[string]string{}
	if err := AddSets(sets, setValues); err != nil {
		return nil, err
	}
	out := []configs.Source{{Name: "flag --set", Values: setValues}}
	if listen != (Listen{}) && f.Changed("listen") {
		values := map[string]string{}
		if err := AddListen(f.Lookup("listen").Value.String(), listen.BindKey, listen.PortKey, values); err != nil {
			return nil, err
		}
		out = append(out, configs.Source{Name: "flag --listen", Values: values})
	}
	for _, k := range keys {
		fl := f.Lookup(k.Flag)
		if fl == nil || !fl.Changed {
			continue
		}
		name := "flag --" + fl.Name
		if fl.Shorthand != "" {
			name = "flag -" + fl.Shorthand + " (--" + fl.Name + ")"
		}
		out = append(out, configs.Source{Name: name, Values: map[string]string{k.Key: fl.Value.String()}})
	}
	return out, nil
}

// RocketMQArgs rewrites the options of RocketMQ's start scripts that a
// flag parser would read differently or not at all into this binary's
// flags: each argument whose name (the part before any '=') is a key of
// long becomes long's flag, keeping "=value"; every other argument is
// left as it is. Short options such as mqbroker's "-pc", which pflag
// would read as -p and -c, are rewritten the same way.
func RocketMQArgs(args []string, long map[string]string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		name, value, hasValue := strings.Cut(a, "=")
		switch flag, ok := long[name]; {
		case !ok:
			out = append(out, a)
		case hasValue:
			out = append(out, flag+"="+value)
		default:
			out = append(out, flag)
		}
	}
	return out
}
