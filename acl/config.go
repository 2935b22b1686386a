package acl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// RetryGroupTopicPrefix starts the retry topic of a consumer group; a group
// is checked as the resource named by its retry topic.
const RetryGroupTopicPrefix = "%RETRY%"

// minKeyLength is the length an access key and a secret key must exceed.
const minKeyLength = 6

// Config is a parsed plain_acl.yml.
type Config struct {
	// GlobalWhite admits a client from any of its addresses without checks.
	GlobalWhite []AddressPattern
	// Accounts by access key.
	Accounts map[string]*Account
	// Version is the file's dataVersion (zero when it has none).
	Version Version
}

// Account is one entry of the file's accounts list.
type Account struct {
	AccessKey        string
	SecretKey        string
	White            AddressPattern
	Admin            bool
	DefaultTopicPerm Perm
	DefaultGroupPerm Perm
	// DefaultPermsGiven tells which defaults the file spelled out (topic,
	// group): a missing one reads as DENY, but the migration to ACL 2.0
	// creates no default policy entry for it, as RocketMQ's AuthMigrator.
	DefaultPermsGiven [2]bool
	// Resources maps a topic, or a group's retry topic, to its permission.
	Resources map[string]Perm
}

// fileLayout is the YAML shape of plain_acl.yml. Keys are RocketMQ's,
// dataVersion included (a list of one counter and timestamp, written by
// the broker when it edits the file).
type fileLayout struct {
	GlobalWhiteRemoteAddresses []string `yaml:"globalWhiteRemoteAddresses"`
	Accounts                   []struct {
		AccessKey          string   `yaml:"accessKey"`
		SecretKey          string   `yaml:"secretKey"`
		WhiteRemoteAddress string   `yaml:"whiteRemoteAddress"`
		Admin              bool     `yaml:"admin"`
		DefaultTopicPerm   string   `yaml:"defaultTopicPerm"`
		DefaultGroupPerm   string   `yaml:"defaultGroupPerm"`
		TopicPerms         []string `yaml:"topicPerms"`
		GroupPerms         []string `yaml:"groupPerms"`
	} `yaml:"accounts"`
	DataVersion []struct {
		Counter   int64 `yaml:"counter"`
		Timestamp int64 `yaml:"timestamp"`
	} `yaml:"dataVersion"`
}

// Version is the file's dataVersion: RocketMQ bumps it on every change
// made through the broker, and mqadmin compares it across a cluster.
type Version struct {
	Counter   int64
	Timestamp int64
}

// Parse reads a plain_acl.yml. Every error names the account and entry it
// is about.
func Parse(data []byte) (*Config, error) {
	var f fileLayout
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return nil, fmt.Errorf("parse ACL file: %w", err)
	}
	cfg := &Config{Accounts: make(map[string]*Account, len(f.Accounts))}
	if len(f.DataVersion) > 0 {
		cfg.Version = Version{Counter: f.DataVersion[0].Counter, Timestamp: f.DataVersion[0].Timestamp}
	}
	for _, w := range f.GlobalWhiteRemoteAddresses {
		p, err := ParseAddressPattern(w)
		if err != nil {
			return nil, fmt.Errorf("globalWhiteRemoteAddresses: %w", err)
		}
		cfg.GlobalWhite = append(cfg.GlobalWhite, p)
	}
	for i, a := range f.Accounts {
		where := fmt.Sprintf("accounts[%d] (accessKey %q)", i, a.AccessKey)
		if len(a.AccessKey) <= minKeyLength || len(a.SecretKey) <= minKeyLength {
			return nil, fmt.Errorf("%s: accessKey and secretKey must be longer than %d characters", where, minKeyLength)
		}
		if _, dup := cfg.Accounts[a.AccessKey]; dup {
			return nil, fmt.Errorf("%s: the access key is listed twice", where)
		}
		acc := &Account{AccessKey: a.AccessKey, SecretKey: a.SecretKey, Admin: a.Admin, Resources: map[string]Perm{}}
		var err error
		if acc.White, err = ParseAddressPattern(a.WhiteRemoteAddress); err != nil {
			return nil, fmt.Errorf("%s: whiteRemoteAddress: %w", where, err)
		}
		acc.DefaultPermsGiven = [2]bool{strings.TrimSpace(a.DefaultTopicPerm) != "", strings.TrimSpace(a.DefaultGroupPerm) != ""}
		if acc.DefaultTopicPerm, err = ParsePerm(a.DefaultTopicPerm); err != nil {
			return nil, fmt.Errorf("%s: defaultTopicPerm: %w", where, err)
		}
		if acc.DefaultGroupPerm, err = ParsePerm(a.DefaultGroupPerm); err != nil {
			return nil, fmt.Errorf("%s: defaultGroupPerm: %w", where, err)
		}
		if err := acc.addResources(a.TopicPerms, ""); err != nil {
			return nil, fmt.Errorf("%s: topicPerms: %w", where, err)
		}
		if err := acc.addResources(a.GroupPerms, RetryGroupTopicPrefix); err != nil {
			return nil, fmt.Errorf("%s: groupPerms: %w", where, err)
		}
		cfg.Accounts[a.AccessKey] = acc
	}
	return cfg, nil
}

// addResources records entries "name=PERM", each name prefixed (a group
// becomes its retry topic).
func (a *Account) addResources(entries []string, prefix string) error {
	for _, e := range entries {
		name, perm, ok := strings.Cut(e, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.TrimSpace(perm) == "" || strings.Contains(perm, "=") {
			return fmt.Errorf("%q is not name=PERM (for example topicA=SUB)", e)
		}
		p, err := ParsePerm(perm)
		if err != nil {
			return fmt.Errorf("%q: %w", e, err)
		}
		a.Resources[prefix+name] = p
	}
	return nil
}
