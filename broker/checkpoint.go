package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// processCheckpoint answers rocketkv's CheckpointIndex: a consistent Pebble
// checkpoint of the index for kvdump to read while the broker runs.
func (b *Broker) processCheckpoint(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	root, err := filepath.Abs(b.cfg.StorePathRootDir)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	dir := remoting.Header(req.ExtFields).OptString(remoting.CheckpointFieldDir, "")
	if dir == "" {
		parent := filepath.Join(root, "checkpoints")
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("create %s: %v", parent, err))
		}
		dir = filepath.Join(parent, time.Now().UTC().Format("20060102T150405.000000000"))
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if err := b.db.Checkpoint(dir); err != nil {
		b.log.Warn().Err(err).Str("dir", dir).Msg("index checkpoint")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.log.Info().Str("dir", dir).Msg("index checkpoint written")
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = remoting.Header{remoting.CheckpointFieldPath: dir, remoting.CheckpointFieldStoreRoot: root}
	return resp
}
