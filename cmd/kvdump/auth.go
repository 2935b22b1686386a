package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

func usersCommand(o *globalOptions) *cobra.Command {
	var showPasswords bool
	cmd := &cobra.Command{
		Use:   "users",
		Short: "ACL 2.0 users (JSON: RocketMQ's UserInfo, one per line); passwords masked unless --show-passwords",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&showPasswords, "show-passwords", false, "print the passwords (the users' secret keys) instead of "+kvindex.PasswordMask)
	cmd.RunE = withStore(o, func(ctx context.Context, s *store, out *output) error {
		return runUsers(ctx, s, out, showPasswords)
	})
	return cmd
}

func aclsCommand(o *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "acls",
		Short: "ACL 2.0 access lists (JSON: RocketMQ's AclInfo, one per line; the table shows one policy entry a row)",
		Args:  cobra.NoArgs,
		RunE:  withStore(o, runACLs),
	}
}

func runUsers(ctx context.Context, s *store, out *output, showPasswords bool) error {
	users, err := s.db.Users(1)
	if err != nil {
		return err
	}
	l := newListing(ctx, out, "USER", "PASSWORD", "TYPE", "STATUS")
	return l.finish(users.Each(func(u meta.UserInfo) bool {
		if !showPasswords {
			u = kvindex.UserRecord{Name: u.Username, User: u}.Masked().User
		}
		return l.emit(u, func() []string {
			return []string{cell(u.Username), cell(u.Password), cell(u.UserType), cell(u.UserStatus)}
		})
	}))
}

func runACLs(ctx context.Context, s *store, out *output) error {
	acls, err := s.db.ACLs(1)
	if err != nil {
		return err
	}
	l := newListing(ctx, out, "SUBJECT", "POLICY", "RESOURCE", "ACTIONS", "SOURCEIPS", "DECISION")
	return l.finish(acls.Each(func(a meta.AclInfo) bool {
		if l.t == nil {
			return l.emit(a, nil)
		}
		rows := 0
		for _, p := range a.Policies {
			for _, e := range p.Entries {
				rows++
				l.emit(a, func() []string {
					return []string{cell(a.Subject), cell(p.PolicyType), cell(e.Resource), list(e.Actions), list(e.SourceIps), cell(e.Decision)}
				})
			}
		}
		if rows == 0 {
			return l.emit(a, func() []string { return []string{cell(a.Subject), "-", "-", "-", "-", "-"} })
		}
		return l.ctx.Err() == nil
	}))
}

// list formats a list of names for a table cell.
func list(v []string) string { return cell(strings.Join(v, ",")) }
