package ha

// RuntimeInfo is RocketMQ's HARuntimeInfo, the JSON body of
// GET_BROKER_HA_STATUS (mqadmin haStatus): a master's slaves, or a
// slave's master.
type RuntimeInfo struct {
	// Master is true on a master (HAConnectionInfo is filled), false on a
	// slave (HAClientRuntimeInfo is).
	Master bool `json:"master"`
	// MasterCommitLogMaxOffset is a master's CommitLog end.
	MasterCommitLogMaxOffset int64 `json:"masterCommitLogMaxOffset"`
	// InSyncSlaveNums counts a master's slaves within haMaxGapNotInSync.
	InSyncSlaveNums int `json:"inSyncSlaveNums"`
	// HAConnectionInfo is one row per connected slave.
	HAConnectionInfo []ConnectionInfo `json:"haConnectionInfo"`
	// HAClientRuntimeInfo is a slave's connection to its master.
	HAClientRuntimeInfo ClientInfo `json:"haClientRuntimeInfo"`
}

// ConnectionInfo is one slave of a master (HAConnectionRuntimeInfo).
type ConnectionInfo struct {
	Addr                    string `json:"addr"`
	SlaveAckOffset          int64  `json:"slaveAckOffset"`
	Diff                    int64  `json:"diff"`
	InSync                  bool   `json:"inSync"`
	TransferredByteInSecond int64  `json:"transferredByteInSecond"`
	TransferFromWhere       int64  `json:"transferFromWhere"`
}

// ClientInfo is a slave's view of its master (HAClientRuntimeInfo).
type ClientInfo struct {
	MasterAddr              string `json:"masterAddr,omitempty"`
	TransferredByteInSecond int64  `json:"transferredByteInSecond"`
	MaxOffset               int64  `json:"maxOffset"`
	LastReadTimestamp       int64  `json:"lastReadTimestamp"`
	LastWriteTimestamp      int64  `json:"lastWriteTimestamp"`
	MasterFlushOffset       int64  `json:"masterFlushOffset"`
}
