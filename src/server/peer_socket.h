// Noticing that the client of a non-streaming request went away. httplib 0.11 gives handlers no
// access to their connection, and a closed connection is only seen on the next write; a
// non-streaming request writes nothing until it is done. So the handler looks its accepted socket
// up by the peer address httplib reports, and peeks at it while it waits.
#pragma once

#include <string>

namespace mlarun {

// Returns the file descriptor of this process's socket whose peer is remote_addr:remote_port
// (numeric host, as httplib's Request::remote_addr), or -1 when there is none.
int FindPeerSocket(const std::string& remote_addr, int remote_port);

// True when the peer of `fd` has closed or reset the connection. Bytes waiting to be read (a
// pipelined request) count as a live peer; nothing is consumed.
bool PeerClosed(int fd);

}  // namespace mlarun
