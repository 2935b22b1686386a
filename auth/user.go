package auth

import (
	"fmt"
	"strings"

	"github.com/rocketkv/rocketkv/meta"
)

// The user types and statuses as RocketMQ spells them.
const (
	UserSuper   = "Super"
	UserNormal  = "Normal"
	UserEnable  = "enable"
	UserDisable = "disable"
)

// SubjectPrefix starts the subject of a user's access list.
const SubjectPrefix = "User:"

// Subject returns the subject of a user's access list.
func Subject(username string) string { return SubjectPrefix + username }

// SubjectUser returns the username of a subject "User:<name>" (the type in
// any case, as RocketMQ reads it).
func SubjectUser(subject string) (string, error) {
	typ, name, ok := strings.Cut(subject, ":")
	if !ok || !strings.EqualFold(typ, "User") {
		return "", fmt.Errorf("the subject %q is not User:<username>", subject)
	}
	if strings.TrimSpace(name) == "" {
		return "", fmt.Errorf("the subject %q names no user", subject)
	}
	return name, nil
}

// normalize spells a user type or status as RocketMQ does; empty stays
// empty; an unknown one is an error.
func normalize(what, v string, allowed ...string) (string, error) {
	if v == "" {
		return "", nil
	}
	for _, a := range allowed {
		if strings.EqualFold(a, v) {
			return a, nil
		}
	}
	return "", fmt.Errorf("%s %q is not %s", what, v, strings.Join(allowed, " or "))
}

// NewUser checks a user to create as RocketMQ's AuthenticationMetadataManager
// does (a username and a password) and fills in the defaults: Normal,
// enable.
func NewUser(u meta.UserInfo) (meta.UserInfo, error) {
	if strings.TrimSpace(u.Username) == "" {
		return u, fmt.Errorf("username can not be blank")
	}
	if strings.TrimSpace(u.Password) == "" {
		return u, fmt.Errorf("password can not be blank")
	}
	var err error
	if u.UserType, err = normalize("userType", u.UserType, UserSuper, UserNormal); err != nil {
		return u, err
	}
	if u.UserStatus, err = normalize("userStatus", u.UserStatus, UserEnable, UserDisable); err != nil {
		return u, err
	}
	if u.UserType == "" {
		u.UserType = UserNormal
	}
	if u.UserStatus == "" {
		u.UserStatus = UserEnable
	}
	return u, nil
}

// UpdateUser returns old with the fields upd sets: a non-blank password, a
// type, a status.
func UpdateUser(old, upd meta.UserInfo) (meta.UserInfo, error) {
	typ, err := normalize("userType", upd.UserType, UserSuper, UserNormal)
	if err != nil {
		return old, err
	}
	status, err := normalize("userStatus", upd.UserStatus, UserEnable, UserDisable)
	if err != nil {
		return old, err
	}
	if strings.TrimSpace(upd.Password) != "" {
		old.Password = upd.Password
	}
	if typ != "" {
		old.UserType = typ
	}
	if status != "" {
		old.UserStatus = status
	}
	return old, nil
}

// IsSuper reports whether u is a super user (who skips authorization).
func IsSuper(u meta.UserInfo) bool { return strings.EqualFold(u.UserType, UserSuper) }

// IsDisabled reports whether u may not sign in.
func IsDisabled(u meta.UserInfo) bool { return strings.EqualFold(u.UserStatus, UserDisable) }
