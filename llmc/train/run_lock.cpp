// run_lock.cpp — see run_lock.h.
#include "train/run_lock.h"

#include "utils.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace train_gpt {

std::string lock_file_of(const std::string& dir) { return dir + "/train_gpt.lock"; }

namespace {

// Fails naming the holder: fd is the lock file, held by another process.
[[noreturn]] void fail_in_use(const std::string& dir, const std::string& path, int fd) {
    std::string holder;
    char buf[4096];
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) holder.assign(buf, (size_t)n);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' '))
        holder.pop_back();
    ::close(fd);
    fail(
        "%s is in use by another run: %s (%s holds the lock). Wait for it to end, or give this run another "
        "directory",
        dir.c_str(), holder.empty() ? "its holder wrote no details" : holder.c_str(), path.c_str());
}

// Writes the holder's line (pid, host, start time, the command) into the held lock file `fd`.
void write_holder(int fd, const std::string& path, const std::string& command) {
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    const std::time_t now = std::time(nullptr);
    char when[64];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
    const std::string text = format("pid %d on %s, started %s: %s\n", (int)::getpid(), host, when, command.c_str());
    if (::ftruncate(fd, 0) != 0) fail("%s: cannot write the lock's holder: %s", path.c_str(), std::strerror(errno));
    write_all(fd, text.data(), text.size(), path);
}

// The (device, inode) of `path`, or {0, 0} where it cannot be stat'ed.
std::pair<dev_t, ino_t> identity_of(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return {0, 0};
    return {st.st_dev, st.st_ino};
}

}   // namespace

void DirLock::fail_if_held(const std::string& dir) {
    const std::string path = lock_file_of(dir);
    if (!file_exists(path)) return;
    const int fd = open_regular_file(path, O_RDONLY);
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) fail_in_use(dir, path, fd);
    ::close(fd);   // free (the shared lock goes with it), or a filesystem without flock
}

std::unique_ptr<DirLock> DirLock::acquire(const std::string& dir, const std::string& command, std::string* warning) {
    const std::string path = lock_file_of(dir);
    // a link (a copy made with cp -rs holds the original's): its target would be truncated and
    // written, and the lock taken on another directory's file
    if (struct stat link; ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
        fail("%s is a symbolic link; a directory's lock file is its own: remove the link (a run writes a new one)",
             path.c_str());
    }
    const int fd = open_regular_file(path, O_RDWR | O_CREAT | O_NOFOLLOW);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        if (err == EWOULDBLOCK) fail_in_use(dir, path, fd);
        ::close(fd);
        // ENOLCK, EOPNOTSUPP, ENOSYS: a filesystem without flock
        *warning = format("cannot lock %s (%s): a second run in %s would not be detected", path.c_str(),
                          std::strerror(err), dir.c_str());
        return nullptr;
    }
    try {   // the holder, for whoever is refused: one line
        write_holder(fd, path, command);
    } catch (const Error&) {
        ::close(fd);
        throw;
    }
    return std::unique_ptr<DirLock>(new DirLock(path, fd, command, identity_of(dir)));
}

DirLock::DirLock(std::string path, int fd, std::string command, std::pair<dev_t, ino_t> dir)
    : path_(std::move(path)), command_(std::move(command)), fd_(fd), dir_dev_(dir.first), dir_ino_(dir.second) {
    struct stat st;
    if (::fstat(fd_, &st) == 0) {
        dev_ = st.st_dev;
        ino_ = st.st_ino;
    }
}

bool DirLock::retake_deleted_file() {
    struct stat held;
    if (::fstat(fd_, &held) != 0 || held.st_nlink > 0) return false;   // the file is still somewhere
    const std::string dir = path_.substr(0, path_.find_last_of('/'));
    if (dir_ino_ == 0 || identity_of(dir) != std::make_pair(dir_dev_, dir_ino_)) return false;   // another dir
    // O_EXCL: a lock file there now was made by a run that started after the deletion
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) return false;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {   // taken in between (or no flock here): not ours
        ::close(fd);
        return false;
    }
    try {
        write_holder(fd, path_, command_);
    } catch (const Error&) {
        ::close(fd);
        throw;
    }
    ::close(fd_);   // the deleted file's lock, which no other run can reach any more
    fd_ = fd;
    struct stat st;
    if (::fstat(fd_, &st) == 0) {
        dev_ = st.st_dev;
        ino_ = st.st_ino;
    }
    return true;
}

std::string DirLock::moved_or_deleted() const {
    struct stat st;
    if (::stat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) return "";
    // where the held file is now: Linux names an open file's current path in /proc/self/fd
    struct stat held;
    if (::fstat(fd_, &held) == 0 && held.st_nlink > 0) {
        char now[PATH_MAX + 1] = {0};
        const ssize_t n = ::readlink(format("/proc/self/fd/%d", fd_).c_str(), now, PATH_MAX);
        if (n > 0) {
            std::string dir(now, (size_t)n);
            const size_t slash = dir.find_last_of('/');
            if (slash != std::string::npos && slash > 0) dir.resize(slash);
            return "it is now " + dir;
        }
        return "it is elsewhere now";
    }
    const std::string dir = path_.substr(0, path_.find_last_of('/'));
    if (dir_ino_ != 0 && identity_of(dir) == std::make_pair(dir_dev_, dir_ino_)) {
        return "only its lock file was deleted, and another run has made a new one there since";
    }
    return "it was deleted";
}

bool DirLock::held_at(const std::string& lock_file) const {
    struct stat st;
    return ::stat(lock_file.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

DirLock::~DirLock() {
    if (fd_ >= 0) ::close(fd_);   // releases the lock; the file stays, naming its last holder
}

}   // namespace train_gpt
