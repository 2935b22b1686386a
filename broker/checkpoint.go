package broker

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// processCheckpoint answers rocketkv's CheckpointIndex: a consistent Pebble
// checkpoint of the index for kvdump to read while the broker runs. Only a
// client on this machine may ask (it has to read the files), and only for a
// directory inside the configured checkpoint directory: the request must
// not let a client make the broker write wherever it can. Both the socket's
// peer and the client a PROXY protocol header names must be local: a header
// can claim any address, and a balancer on this machine forwards remote
// clients.
func (b *Broker) processCheckpoint(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if !loopbackPeer(conn.PeerAddr()) || !loopbackPeer(conn.RemoteAddr()) {
		b.log.Warn().Stringer("conn", conn).Msg("index checkpoint refused: not a loopback client")
		return remoting.NewResponse(req, remoting.NoPermission,
			"index checkpoints are served to clients on the broker's machine only (kvdump must read the files)")
	}
	root, err := filepath.Abs(b.cfg.StorePathRootDir)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	clogDir, err := filepath.Abs(b.cfg.CommitLogDir())
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	parent := b.cfg.IndexCheckpointDir
	if parent == "" {
		parent = filepath.Join(root, "checkpoints")
	}
	if parent, err = filepath.Abs(parent); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	dir := remoting.Header(req.ExtFields).OptString(remoting.CheckpointFieldDir, "")
	if dir == "" {
		dir = filepath.Join(parent, time.Now().UTC().Format("20060102T150405.000000000"))
	} else if dir, err = filepath.Abs(dir); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if !inside(parent, dir) {
		b.log.Warn().Str("dir", dir).Str("allowed", parent).Msg("index checkpoint refused: directory outside indexCheckpointDir")
		return remoting.NewResponse(req, remoting.NoPermission,
			fmt.Sprintf("checkpoint directory %s is not inside %s (indexCheckpointDir)", dir, parent))
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("create %s: %v", filepath.Dir(dir), err))
	}
	if err := b.db.Checkpoint(dir); err != nil {
		b.log.Warn().Err(err).Str("dir", dir).Msg("index checkpoint")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.log.Info().Str("dir", dir).Msg("index checkpoint written")
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = remoting.Header{remoting.CheckpointFieldPath: dir, remoting.CheckpointFieldStoreRoot: root,
		remoting.CheckpointFieldCommitLog: clogDir}
	return resp
}

// inside reports whether the cleaned absolute path dir lies strictly below
// the cleaned absolute path parent.
func inside(parent, dir string) bool {
	rel, err := filepath.Rel(parent, dir)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// loopbackPeer reports whether a connection's remote address is a loopback
// address (or a Unix socket).
func loopbackPeer(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	case nil:
		return false
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
