package configs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ControllerSettings is the configuration a controller was started from
// (bin/controller's file, or the name server's with
// enableControllerInNamesrv), as UPDATE_CONTROLLER_CONFIG reads and
// changes it. RocketMQ's update sets every key of its ControllerConfig and
// NettyServerConfig the body names (MixAll.properties2Object) and writes
// the configuration back; a ControllerSettings says which keys that is
// here, checks their values and writes them back. A value is immutable:
// Update returns a new one.
type ControllerSettings interface {
	// Controller returns the controller's keys, with the
	// scanNotActiveBrokerInterval and configBlackList it runs with.
	Controller() (Controller, time.Duration, string)
	// Settings returns every key's value under its canonical name.
	Settings() map[string]string
	// BlackListed returns the keys of props the update refuses
	// (configBlackList, configStorePath and rocketmqHome, which RocketMQ
	// never lets it change, and those configBlackList names), compared
	// by the key they set.
	BlackListed(props map[string]string) []string
	// Update returns the settings with props applied, the canonical names
	// of the keys whose value changed, and the inert keys among props. A
	// key the update does not take or a value that does not parse is an
	// error naming the key, and nothing is applied.
	Update(props map[string]string) (ControllerSettings, []string, []InertKey, error)
	// Values returns the values of keys (canonical names), secrets
	// unmasked: what is written back into the configuration file.
	Values(keys []string) map[string]string
}

// controllerUpdateBlackList are the keys RocketMQ's controller never lets
// UPDATE_CONTROLLER_CONFIG change (ControllerRequestProcessor's list),
// on top of those configBlackList names.
var controllerUpdateBlackList = []string{"configBlackList", "configStorePath", "rocketmqHome"}

// StandaloneControllerSettings is bin/controller's configuration as
// UPDATE_CONTROLLER_CONFIG changes it: every key of its file may be
// updated, those of the black list aside.
func StandaloneControllerSettings(c ControllerFile) ControllerSettings {
	return standaloneSettings{c: c}
}

type standaloneSettings struct{ c ControllerFile }

func (s standaloneSettings) Controller() (Controller, time.Duration, string) {
	return s.c.Controller, s.c.ScanNotActiveBrokerInterval, s.c.ConfigBlackList
}

func (s standaloneSettings) Settings() map[string]string { return s.c.Settings() }

func (s standaloneSettings) BlackListed(props map[string]string) []string {
	return blackListed(props, controllerUpdateBlackList, s.c.ConfigBlackList, keyNorm(controllerFileSchema.canonical))
}

func (s standaloneSettings) Update(props map[string]string) (ControllerSettings, []string, []InertKey, error) {
	next := s.c
	_, inert, err := controllerFileSchema.applyReporting(&next, props)
	if err != nil {
		return nil, nil, nil, err
	}
	return standaloneSettings{c: next}, controllerFileSchema.changed(&s.c, &next), inert, nil
}

func (s standaloneSettings) Values(keys []string) map[string]string {
	return controllerFileSchema.values(&s.c, keys)
}

// NamesrvControllerSettings is a name server's configuration as its
// embedded controller's UPDATE_CONTROLLER_CONFIG changes it: the keys of
// RocketMQ's ControllerConfig (those rocketkv follows, those it accepts
// without effect, and scanNotActiveBrokerInterval), written back into the
// name server's file. The name server's own keys, its listener's among
// them, are refused: UPDATE_NAMESRV_CONFIG changes those.
func NamesrvControllerSettings(n Namesrv) ControllerSettings {
	return namesrvControllerSettings{n: n}
}

type namesrvControllerSettings struct{ n Namesrv }

// namesrvControllerKeys are the keys (canonical, inert keys lower-cased)
// the embedded controller's update takes.
var namesrvControllerKeys = func() map[string]bool {
	keys := map[string]bool{"scanNotActiveBrokerInterval": true}
	for _, f := range controllerFields(func(n *Namesrv) *Controller { return &n.Controller }) {
		keys[f.key] = true
	}
	for _, k := range controllerInert[Namesrv]() {
		keys[strings.ToLower(k.key)] = true
	}
	return keys
}()

func (s namesrvControllerSettings) Controller() (Controller, time.Duration, string) {
	return s.n.Controller, s.n.ScanNotActiveBrokerInterval, s.n.ConfigBlackList
}

func (s namesrvControllerSettings) Settings() map[string]string { return s.n.Settings() }

func (s namesrvControllerSettings) BlackListed(props map[string]string) []string {
	return blackListed(props, controllerUpdateBlackList, s.n.ConfigBlackList, keyNorm(namesrvSchema.canonical))
}

func (s namesrvControllerSettings) Update(props map[string]string) (ControllerSettings, []string, []InertKey, error) {
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if name, ok := namesrvSchema.canonical(k); ok && !namesrvControllerKeys[name] {
			return nil, nil, nil, fmt.Errorf("key %s is the name server's, not the controller's: UPDATE_NAMESRV_CONFIG changes it", name)
		}
	}
	next := s.n
	_, inert, err := namesrvSchema.applyReporting(&next, props)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, ik := range inert {
		if !namesrvControllerKeys[strings.ToLower(ik.Key)] {
			return nil, nil, nil, fmt.Errorf("key %s is the name server's, not the controller's: UPDATE_NAMESRV_CONFIG changes it", ik.Key)
		}
	}
	return namesrvControllerSettings{n: next}, namesrvSchema.changed(&s.n, &next), inert, nil
}

func (s namesrvControllerSettings) Values(keys []string) map[string]string {
	return namesrvSchema.values(&s.n, keys)
}
