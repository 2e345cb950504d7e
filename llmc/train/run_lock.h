// run_lock.h — one run per directory: an advisory lock (flock) on <dir>/train_gpt.lock, held for
// the life of the process.
//
// The lock file records its holder (pid, host, start time, the command), so that a second run is
// refused naming the first: "out is in use by another run: pid 4242 on node07, started
// 2026-12-01 17:56:08 UTC (out/train_gpt.lock)". The kernel releases a flock when its holder
// ends, however it ends (SIGKILL included), so a lock is never stale; the file stays, and names
// the last holder. flock is advisory: it stops other train_gpt runs, nothing else. Where the
// filesystem does not support it (some network filesystems), the run goes on with a warning.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <sys/types.h>

namespace train_gpt {

class DirLock {
  public:
    // Locks `dir` (which must exist) or fails naming the holder. *warning: set (and the lock not
    // held) when the filesystem cannot lock.
    static std::unique_ptr<DirLock> acquire(const std::string& dir, const std::string& command, std::string* warning);
    // Fails naming the holder if a live process holds `dir`'s lock; writes nothing. A run checks
    // this before it reads a directory another run may be writing (a checkpoint it would resume).
    static void fail_if_held(const std::string& dir);
    ~DirLock();
    DirLock(const DirLock&) = delete;
    DirLock& operator=(const DirLock&) = delete;
    const std::string& path() const { return path_; }
    // "" while path() still names the lock file this run holds. Otherwise the directory was moved or
    // deleted under the live run (and a new run may hold a new lock at the old path): "it is now
    // <dir>" with where the held file went, or "it was deleted"; or the directory is where it was,
    // its lock file deleted and a new one made there ("only its lock file was deleted, ...": what
    // keeps retake_deleted_file from taking it). A run checks this before it writes into a
    // directory again, so that it never writes (or prunes) among another run's files.
    std::string moved_or_deleted() const;
    // Whether `lock_file` (another name of the directory: a symbolic link, "../p/x") is the file
    // this run holds.
    bool held_at(const std::string& lock_file) const;
    // The held lock file was deleted while its directory stayed where it was (a clean-up of lock
    // files that look stale): lock a new file at path() and hold that, true. False, holding what it
    // held, where the directory is another now or a lock file stands at path() again (a run that
    // started after the deletion made it: this run no longer has the directory to itself).
    bool retake_deleted_file();

  private:
    DirLock(std::string path, int fd, std::string command, std::pair<dev_t, ino_t> dir);
    std::string path_;
    std::string command_;   // the holder's command, written again by retake_deleted_file
    int fd_ = -1;
    dev_t dev_ = 0;   // the held lock file's identity, from fstat at acquire
    ino_t ino_ = 0;
    dev_t dir_dev_ = 0;   // its directory's, from stat at acquire
    ino_t dir_ino_ = 0;
};

// The lock file of a directory: <dir>/train_gpt.lock.
std::string lock_file_of(const std::string& dir);

}   // namespace train_gpt
