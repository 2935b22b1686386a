package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// The ACL 2.0 commands, with mqadmin's names, flags and output: each goes
// to the broker of -b, or with -c to every broker (masters and slaves) of
// a cluster the name server of -n knows.

// authTarget is the -c flag shared by the ACL 2.0 commands.
type authTarget struct{ cluster string }

func (t *authTarget) flags(cmd *cobra.Command, what string) {
	cmd.Flags().StringVarP(&t.cluster, "clusterName", "c", "", what+" every broker of this cluster (from the name server) instead of -b")
}

// addrs returns the brokers a command goes to.
func (t *authTarget) addrs(ctx context.Context, g *globals) ([]string, error) {
	if t.cluster == "" {
		return []string{g.broker}, nil
	}
	return g.clusterBrokers(ctx, t.cluster, false)
}

// splitList reads a comma-separated flag as mqadmin does: blanks trimmed,
// empty parts dropped.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// putUser sends u to the broker at addr with code, AUTH_CREATE_USER or
// AUTH_UPDATE_USER, as RocketMQ's createUser and updateUser do: the name
// in the header, the UserInfo as the body.
func (g *globals) putUser(ctx context.Context, addr string, code int32, u meta.UserInfo) error {
	return g.invokeJSON(ctx, addr, code, remoting.Header{"username": u.Username}, u)
}

// getUser asks the broker at addr for one user (AUTH_GET_USER); found is
// false when the broker answers without a body, as a RocketMQ broker
// answers for a user it does not have.
func (g *globals) getUser(ctx context.Context, addr, name string) (meta.UserInfo, bool, error) {
	return fetchJSON[meta.UserInfo](ctx, g, addr, remoting.AuthGetUser, remoting.Header{"username": name})
}

// listUsers asks the broker at addr for its users whose name contains
// filter, every one when it is empty (AUTH_LIST_USER).
func (g *globals) listUsers(ctx context.Context, addr, filter string) ([]meta.UserInfo, error) {
	users, _, err := fetchJSON[[]meta.UserInfo](ctx, g, addr, remoting.AuthListUser, remoting.Header{"filter": filter})
	return users, err
}

// putACL sends info to the broker at addr with code, AUTH_CREATE_ACL or
// AUTH_UPDATE_ACL: the subject in the header, the AclInfo as the body.
func (g *globals) putACL(ctx context.Context, addr string, code int32, info meta.AclInfo) error {
	return g.invokeJSON(ctx, addr, code, remoting.Header{"subject": info.Subject}, info)
}

// getACL asks the broker at addr for a subject's access list
// (AUTH_GET_ACL); found is false when the broker answers without a body,
// as it does for a subject without one.
func (g *globals) getACL(ctx context.Context, addr, subject string) (meta.AclInfo, bool, error) {
	return fetchJSON[meta.AclInfo](ctx, g, addr, remoting.AuthGetACL, remoting.Header{"subject": subject})
}

// listACLs asks the broker at addr for the access lists whose subject and
// resources contain the filters, every one when they are empty
// (AUTH_LIST_ACL).
func (g *globals) listACLs(ctx context.Context, addr, subjectFilter, resourceFilter string) ([]meta.AclInfo, error) {
	acls, _, err := fetchJSON[[]meta.AclInfo](ctx, g, addr, remoting.AuthListACL,
		remoting.Header{"subjectFilter": subjectFilter, "resourceFilter": resourceFilter})
	return acls, err
}

// userCmd builds createUser and updateUser.
func userCmd(g *globals, use, verb string, code int32, withStatus bool) *cobra.Command {
	var t authTarget
	var u meta.UserInfo
	cmd := &cobra.Command{
		Use:   use,
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " user to cluster (AUTH_" + strings.ToUpper(verb) + "_USER).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs, err := t.addrs(cmd.Context(), g)
			if err != nil {
				return err
			}
			u.Username = strings.TrimSpace(u.Username)
			for _, a := range addrs {
				if err := g.putUser(cmd.Context(), a, code, u); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s user to %s success.\n", verb, a)
			}
			return nil
		},
	}
	t.flags(cmd, verb+" the user on")
	f := cmd.Flags()
	f.StringVarP(&u.Username, "username", "u", "", "the username of user to "+verb)
	f.StringVarP(&u.Password, "password", "p", "", "the password of user to "+verb)
	f.StringVarP(&u.UserType, "userType", "t", "", "the userType of user to "+verb+": Super or Normal")
	if withStatus {
		f.StringVarP(&u.UserStatus, "userStatus", "s", "", "the userStatus of user to "+verb+": enable or disable")
	}
	_ = cmd.MarkFlagRequired("username")
	if !withStatus {
		_ = cmd.MarkFlagRequired("password")
	}
	return cmd
}

func deleteUserCmd(g *globals) *cobra.Command {
	var t authTarget
	var name string
	cmd := &cobra.Command{
		Use:   "deleteUser",
		Short: "Delete user from cluster (AUTH_DELETE_USER), and its access list.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs, err := t.addrs(cmd.Context(), g)
			if err != nil {
				return err
			}
			for _, a := range addrs {
				if _, err := g.invoke(cmd.Context(), a, remoting.AuthDeleteUser, remoting.Header{"username": strings.TrimSpace(name)}, nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "delete user to %s success.\n", a)
			}
			return nil
		},
	}
	t.flags(cmd, "delete the user from")
	cmd.Flags().StringVarP(&name, "username", "u", "", "the username of user to delete.")
	_ = cmd.MarkFlagRequired("username")
	return cmd
}

const userFormat = "%-16s\t%-22s\t%-22s\t%-22s\n"

func printUsers(out io.Writer, users []meta.UserInfo) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, userFormat, "#UserName", "#Password", "#UserType", "#UserStatus")
	for _, u := range users {
		fmt.Fprintf(w, userFormat, u.Username, u.Password, u.UserType, u.UserStatus)
	}
	return w.Flush()
}

func getUserCmd(g *globals) *cobra.Command {
	var t authTarget
	var name string
	cmd := &cobra.Command{
		Use:   "getUser",
		Short: "Get user from cluster (AUTH_GET_USER).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs, err := t.addrs(cmd.Context(), g)
			if err != nil {
				return err
			}
			u, found, err := g.getUser(cmd.Context(), addrs[0], strings.TrimSpace(name))
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("user %s not found on %s", name, addrs[0])
			}
			return printUsers(cmd.OutOrStdout(), []meta.UserInfo{u})
		},
	}
	t.flags(cmd, "get the user from the first broker of")
	cmd.Flags().StringVarP(&name, "username", "u", "", "the username of user to get")
	_ = cmd.MarkFlagRequired("username")
	return cmd
}

func listUserCmd(g *globals) *cobra.Command {
	var t authTarget
	var filter string
	cmd := &cobra.Command{
		Use:   "listUser",
		Short: "List user from cluster (AUTH_LIST_USER).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs, err := t.addrs(cmd.Context(), g)
			if err != nil {
				return err
			}
			users, err := g.listUsers(cmd.Context(), addrs[0], filter)
			if err != nil {
				return err
			}
			return printUsers(cmd.OutOrStdout(), users)
		},
	}
	t.flags(cmd, "list the users of the first broker of")
	cmd.Flags().StringVarP(&filter, "filter", "f", "", "the filter to list users (part of the name)")
	return cmd
}

// aclCmd builds createAcl and updateAcl: one policy entry per resource,
// each with the actions, source addresses and decision given.
func aclCmd(g *globals, use, verb string, code int32) *cobra.Command {
	var t authTarget
	var subject, resources, actions, sourceIPs, decision string
	cmd := &cobra.Command{
		Use:   use,
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " acl to cluster (AUTH_" + strings.ToUpper(verb) + "_ACL).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			subject = strings.TrimSpace(subject)
			info := meta.AclInfo{Subject: subject}
			var entries []meta.PolicyEntryInfo
			for _, r := range splitList(resources) {
				entries = append(entries, meta.PolicyEntryInfo{Resource: r, Actions: splitList(actions),
					SourceIps: splitList(sourceIPs), Decision: strings.TrimSpace(decision)})
			}
			if len(entries) == 0 {
				return fmt.Errorf("-r names no resource")
			}
			info.Policies = []meta.PolicyInfo{{Entries: entries}}
			addrs, err := t.addrs(cmd.Context(), g)
			if err != nil {
				return err
			}
			for _, a := range addrs {
				if err := g.putACL(cmd.Context(), a, code, info); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s acl to %s success.\n", verb, a)
			}
			return nil
		},
	}
	t.flags(cmd, verb+" the acl on")
	f := cmd.Flags()
	f.StringVarP(&subject, "subject", "s", "", "the subject of acl to "+verb+", User:<username>")
	f.StringVarP(&resources, "resources", "r", "", "the resources of acl to "+verb+", comma-separated: Topic:t, Group:g, Topic:pre*, Topic:*, Cluster:*, *")
	f.StringVarP(&actions, "actions", "a", "", "the actions of acl to "+verb+", comma-separated: Pub, Sub, Create, Update, Delete, Get, List, All")
	f.StringVarP(&sourceIPs, "sourceIp", "i", "", "the sourceIps of acl to "+verb+", comma-separated IPs or CIDRs")
	f.StringVarP(&decision, "decision", "d", "", "the decision of acl to "+verb+": Allow or Deny")
	for _, name := range []string{"subject", "resources", "actions", "decision"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func deleteAclCmd(g *globals) *cobra.Command {
	var t authTarget
	var subject, resources string
	cmd := &cobra.Command{
		Use:   "deleteAcl",
		Short: "Delete acl from cluster (AUTH_DELETE_ACL): the entries of the resources, or the whole access list without -r.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs, err := t.addrs(cmd.Context(), g)
			if err != nil {
				return err
			}
			res := splitList(resources)
			if len(res) == 0 {
				res = []string{""}
			}
			for _, a := range addrs {
				for _, r := range res {
					h := remoting.Header{"subject": strings.TrimSpace(subject)}
					if r != "" {
						h["resource"] = r
					}
					if _, err := g.invoke(cmd.Context(), a, remoting.AuthDeleteACL, h, nil); err != nil {
						return err
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "delete acl to %s success.\n", a)
			}
			return nil
		},
	}
	t.flags(cmd, "delete the acl from")
	cmd.Flags().StringVarP(&subject, "subject", "s", "", "the subject of acl to delete.")
	cmd.Flags().StringVarP(&resources, "resources", "r", "", "the resources of acl to delete, comma-separated")
	_ = cmd.MarkFlagRequired("subject")
	return cmd
}

const aclFormat = "%-24s\t%-12s\t%-30s\t%-24s\t%-24s\t%-10s\n"

func printACLs(out io.Writer, acls []meta.AclInfo) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, aclFormat, "#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision")
	for _, a := range acls {
		if len(a.Policies) == 0 {
			fmt.Fprintf(w, aclFormat, a.Subject, "", "", "", "", "")
		}
		for _, p := range a.Policies {
			for _, e := range p.Entries {
				fmt.Fprintf(w, aclFormat, a.Subject, p.PolicyType, e.Resource, strings.Join(e.Actions, ","),
					strings.Join(e.SourceIps, ","), e.Decision)
			}
		}
	}
	return w.Flush()
}

func getAclCmd(g *globals) *cobra.Command {
	var t authTarget
	var subject string
	cmd := &cobra.Command{
		Use:   "getAcl",
		Short: "Get acl from cluster (AUTH_GET_ACL).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs, err := t.addrs(cmd.Context(), g)
			if err != nil {
				return err
			}
			a, found, err := g.getACL(cmd.Context(), addrs[0], strings.TrimSpace(subject))
			if err != nil {
				return err
			}
			var acls []meta.AclInfo
			if found {
				acls = append(acls, a)
			}
			return printACLs(cmd.OutOrStdout(), acls)
		},
	}
	t.flags(cmd, "get the acl from the first broker of")
	cmd.Flags().StringVarP(&subject, "subject", "s", "", "the subject of acl to get")
	_ = cmd.MarkFlagRequired("subject")
	return cmd
}

func listAclCmd(g *globals) *cobra.Command {
	var t authTarget
	var subject, resource string
	cmd := &cobra.Command{
		Use:   "listAcl",
		Short: "List acl from cluster (AUTH_LIST_ACL).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs, err := t.addrs(cmd.Context(), g)
			if err != nil {
				return err
			}
			acls, err := g.listACLs(cmd.Context(), addrs[0], subject, resource)
			if err != nil {
				return err
			}
			return printACLs(cmd.OutOrStdout(), acls)
		},
	}
	t.flags(cmd, "list the acls of the first broker of")
	cmd.Flags().StringVarP(&subject, "subject", "s", "", "the subject of acl to filter.")
	cmd.Flags().StringVarP(&resource, "resource", "r", "", "the resource of acl to filter.")
	return cmd
}

// authCmds are the ACL 2.0 commands.
func authCmds(g *globals) []*cobra.Command {
	return []*cobra.Command{
		userCmd(g, "createUser", "create", remoting.AuthCreateUser, false),
		userCmd(g, "updateUser", "update", remoting.AuthUpdateUser, true),
		deleteUserCmd(g), getUserCmd(g), listUserCmd(g),
		aclCmd(g, "createAcl", "create", remoting.AuthCreateACL),
		aclCmd(g, "updateAcl", "update", remoting.AuthUpdateACL),
		deleteAclCmd(g), getAclCmd(g), listAclCmd(g),
		copyUserCmd(g), copyAclCmd(g),
	}
}
