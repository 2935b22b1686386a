package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// copyUser and copyAcl are mqadmin's CopyUsersSubCommand and
// CopyAclsSubCommand: the users (access lists) named, or every one, are
// read from the broker of -f and created on the broker of -t, or updated
// there when it has them already. mqadmin's -t is one broker; here it may
// also name several, separated by commas, each done in turn.

// authCopy describes what copyUser and copyAcl copy: T is meta.UserInfo or
// meta.AclInfo, key its username or subject.
type authCopy[T any] struct {
	use, short     string
	what           string // "user" or "acl", as mqadmin's lines name it
	namesFlag      string // mqadmin's long name of the names option
	namesShort     string // and its letter
	namesUsage     string
	key            func(T) string
	get            func(ctx context.Context, addr, key string) (T, bool, error)
	list           func(ctx context.Context, addr string) ([]T, error)
	put            func(ctx context.Context, addr string, code int32, v T) error
	create, update int32
}

// copyAuthCmd builds one of the copy commands from its description.
func copyAuthCmd[T any](c authCopy[T]) *cobra.Command {
	var from, to, names string
	cmd := &cobra.Command{
		Use:   c.use,
		Short: c.short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			targets := splitList(to)
			if len(targets) == 0 {
				return fmt.Errorf("-t names no target broker")
			}
			items, err := c.read(ctx, from, splitList(names))
			if err != nil {
				return err
			}
			if len(items) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "no %s to copy from %s\n", c.what, from)
				return nil
			}
			for _, target := range targets {
				for _, v := range items {
					if err := c.copyOne(ctx, target, v); err != nil {
						return fmt.Errorf("copy %s of %s from %s to %s: %w", c.what, c.key(v), from, target, err)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "copy %s of %s from %s to %s success.\n", c.what, c.key(v), from, target)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&from, "fromBroker", "f", "", "the source broker that the "+c.what+"s copy from")
	f.StringVarP(&to, "toBroker", "t", "", "the target broker that the "+c.what+"s copy to (several separated by commas)")
	f.StringVarP(&names, c.namesFlag, c.namesShort, "", c.namesUsage)
	_ = cmd.MarkFlagRequired("fromBroker")
	_ = cmd.MarkFlagRequired("toBroker")
	return cmd
}

// read returns the items of the broker at from: those named that it has,
// or every one when names is empty, as mqadmin reads them (getUser or
// getAcl per name, else listUser or listAcl).
func (c authCopy[T]) read(ctx context.Context, from string, names []string) ([]T, error) {
	if len(names) == 0 {
		items, err := c.list(ctx, from)
		if err != nil {
			return nil, fmt.Errorf("list the %ss of %s: %w", c.what, from, err)
		}
		return items, nil
	}
	var items []T
	for _, n := range names {
		v, found, err := c.get(ctx, from, n)
		if err != nil {
			return nil, fmt.Errorf("get the %s of %s from %s: %w", c.what, n, from, err)
		}
		if found {
			items = append(items, v)
		}
	}
	return items, nil
}

// copyOne creates v on the broker at target, or updates it there when the
// broker has it already.
func (c authCopy[T]) copyOne(ctx context.Context, target string, v T) error {
	_, exists, err := c.get(ctx, target, c.key(v))
	if err != nil {
		return err
	}
	code := c.create
	if exists {
		code = c.update
	}
	return c.put(ctx, target, code, v)
}

func copyUserCmd(g *globals) *cobra.Command {
	return copyAuthCmd(authCopy[meta.UserInfo]{
		use: "copyUser", short: "Copy user to cluster: from the -f broker to the -t broker (AUTH_LIST_USER or AUTH_GET_USER, then AUTH_CREATE_USER or AUTH_UPDATE_USER).",
		what: "user", namesFlag: "usernames", namesShort: "u", namesUsage: "the username list of user to copy (comma-separated; default every user)",
		key:  func(u meta.UserInfo) string { return u.Username },
		get:  g.getUser,
		list: func(ctx context.Context, addr string) ([]meta.UserInfo, error) { return g.listUsers(ctx, addr, "") },
		put:  g.putUser, create: remoting.AuthCreateUser, update: remoting.AuthUpdateUser,
	})
}

func copyAclCmd(g *globals) *cobra.Command {
	return copyAuthCmd(authCopy[meta.AclInfo]{
		use: "copyAcl", short: "Copy acl to cluster: from the -f broker to the -t broker (AUTH_LIST_ACL or AUTH_GET_ACL, then AUTH_CREATE_ACL or AUTH_UPDATE_ACL).",
		what: "acl", namesFlag: "subjects", namesShort: "s", namesUsage: "the subject list of acl to copy (comma-separated, User:<name>; default every acl)",
		key:  func(a meta.AclInfo) string { return a.Subject },
		get:  g.getACL,
		list: func(ctx context.Context, addr string) ([]meta.AclInfo, error) { return g.listACLs(ctx, addr, "", "") },
		put:  g.putACL, create: remoting.AuthCreateACL, update: remoting.AuthUpdateACL,
	})
}
