package acl

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rocketkv/rocketkv/internal/atomicfile"
)

// AccountUpdate is an UPDATE_AND_CREATE_ACL_CONFIG request: the account
// named by AccessKey is created, or its given fields replaced. A nil
// pointer leaves a field as it is; SecretKey and Admin are always set, as
// RocketMQ does.
type AccountUpdate struct {
	AccessKey          string
	SecretKey          string
	WhiteRemoteAddress *string
	Admin              bool
	DefaultTopicPerm   *string
	DefaultGroupPerm   *string
	TopicPerms         *[]string
	GroupPerms         *[]string
}

// UpdateAccount creates or changes an account in the file and puts it in
// force. The file is written only when the result parses; its comments
// and the order of its entries are kept, and its dataVersion is bumped.
func (g *Guard) UpdateAccount(u AccountUpdate) error {
	if len(u.AccessKey) <= minKeyLength || len(u.SecretKey) <= minKeyLength {
		return fmt.Errorf("the accessKey=%s and secretKey cannot be null and length should longer than %d", u.AccessKey, minKeyLength)
	}
	return g.edit(func(root *yaml.Node) error {
		accounts := mappingValue(root, "accounts", yaml.SequenceNode)
		var acc *yaml.Node
		for _, a := range accounts.Content {
			if k := mappingValue(a, "accessKey", 0); k != nil && k.Value == u.AccessKey {
				acc = a
			}
		}
		if acc == nil {
			acc = &yaml.Node{Kind: yaml.MappingNode}
			accounts.Content = append(accounts.Content, acc)
			setScalar(acc, "accessKey", u.AccessKey, "!!str")
		}
		setScalar(acc, "secretKey", u.SecretKey, "!!str")
		if u.WhiteRemoteAddress != nil {
			setScalar(acc, "whiteRemoteAddress", *u.WhiteRemoteAddress, "!!str")
		}
		setScalar(acc, "admin", strconv.FormatBool(u.Admin), "!!bool")
		if u.DefaultTopicPerm != nil {
			setScalar(acc, "defaultTopicPerm", *u.DefaultTopicPerm, "!!str")
		}
		if u.DefaultGroupPerm != nil {
			setScalar(acc, "defaultGroupPerm", *u.DefaultGroupPerm, "!!str")
		}
		if u.TopicPerms != nil {
			setList(acc, "topicPerms", *u.TopicPerms)
		}
		if u.GroupPerms != nil {
			setList(acc, "groupPerms", *u.GroupPerms)
		}
		return nil
	})
}

// DeleteAccount removes an account from the file. It reports false, and
// writes nothing, when no account has that access key.
func (g *Guard) DeleteAccount(accessKey string) (bool, error) {
	found := false
	err := g.edit(func(root *yaml.Node) error {
		accounts := mappingValue(root, "accounts", 0)
		if accounts == nil || accounts.Kind != yaml.SequenceNode {
			return errNothingToDo
		}
		for i, a := range accounts.Content {
			if k := mappingValue(a, "accessKey", 0); k != nil && k.Value == accessKey {
				accounts.Content = append(accounts.Content[:i], accounts.Content[i+1:]...)
				found = true
				return nil
			}
		}
		return errNothingToDo
	})
	if errors.Is(err, errNothingToDo) {
		return false, nil
	}
	return found, err
}

// SetGlobalWhite replaces the file's globalWhiteRemoteAddresses.
func (g *Guard) SetGlobalWhite(addrs []string) error {
	return g.edit(func(root *yaml.Node) error {
		setList(root, "globalWhiteRemoteAddresses", addrs)
		return nil
	})
}

// Version returns the dataVersion of the accounts in force.
func (g *Guard) Version() Version { return g.cur.Load().Version }

var errNothingToDo = errors.New("acl: nothing to change")

// edit applies change to the file's YAML tree, bumps its dataVersion,
// checks that the result parses, writes it atomically and puts it in
// force. A file edited by hand since the last load is edited as it is now.
func (g *Guard) edit(change func(root *yaml.Node) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	raw, err := os.ReadFile(g.path)
	if err != nil {
		return fmt.Errorf("read ACL file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("ACL file %s: %w", g.path, err)
	}
	if doc.Kind == 0 { // an empty file
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("ACL file %s: the top level is not a mapping", g.path)
	}
	if err := change(root); err != nil {
		return err
	}
	bumpVersion(root, time.Now().UnixMilli())
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("encode ACL file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encode ACL file: %w", err)
	}
	cfg, err := Parse(out.Bytes())
	if err != nil {
		return err
	}
	// The file holds secret keys: it keeps its permissions, and a
	// symbolic link keeps pointing at the file it names, which is the one
	// replaced.
	target, err := filepath.EvalSymlinks(g.path)
	if err != nil {
		return fmt.Errorf("resolve ACL file %s: %w", g.path, err)
	}
	fi, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("ACL file %s: %w", target, err)
	}
	if err := atomicfile.WriteFile(target, out.Bytes(), fi.Mode().Perm()); err != nil {
		return fmt.Errorf("write ACL file: %w", err)
	}
	g.cur.Store(cfg)
	g.raw = out.Bytes()
	return nil
}

// bumpVersion moves the file's dataVersion on: counter + 1, timestamp now.
func bumpVersion(root *yaml.Node, now int64) {
	var counter int64
	if dv := mappingValue(root, "dataVersion", 0); dv != nil && dv.Kind == yaml.SequenceNode && len(dv.Content) > 0 {
		if c := mappingValue(dv.Content[0], "counter", 0); c != nil {
			counter, _ = strconv.ParseInt(c.Value, 10, 64)
		}
	}
	entry := &yaml.Node{Kind: yaml.MappingNode}
	setScalar(entry, "counter", strconv.FormatInt(counter+1, 10), "!!int")
	setScalar(entry, "timestamp", strconv.FormatInt(now, 10), "!!int")
	dv := mappingValue(root, "dataVersion", yaml.SequenceNode)
	dv.Kind, dv.Tag, dv.Content = yaml.SequenceNode, "", []*yaml.Node{entry}
}

// mappingValue returns the value of key in mapping m. When it is missing
// and kind is not 0, an empty node of that kind is added and returned.
func mappingValue(m *yaml.Node, key string, kind yaml.Kind) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if kind == yaml.SequenceNode && v.Kind != yaml.SequenceNode {
				// "accounts:" with nothing after it is a null scalar.
				*v = yaml.Node{Kind: yaml.SequenceNode, HeadComment: v.HeadComment, LineComment: v.LineComment}
			}
			return v
		}
	}
	if kind == 0 {
		return nil
	}
	v := &yaml.Node{Kind: kind}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	return v
}

// setScalar sets key in mapping m to a scalar, keeping its comments.
func setScalar(m *yaml.Node, key, value, tag string) {
	v := mappingValue(m, key, yaml.ScalarNode)
	v.Kind, v.Tag, v.Value, v.Style, v.Content = yaml.ScalarNode, tag, value, 0, nil
}

// setList sets key in mapping m to a list of strings, keeping its comments.
func setList(m *yaml.Node, key string, items []string) {
	v := mappingValue(m, key, yaml.SequenceNode)
	v.Kind, v.Tag, v.Content = yaml.SequenceNode, "", nil
	for _, it := range items {
		v.Content = append(v.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: it})
	}
}
