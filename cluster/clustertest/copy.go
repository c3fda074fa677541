package clustertest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// copyStats says what copyTree copied and how.
type copyStats struct {
	files  int
	bytes  int64
	method string // "reflink", "copy" or "reflink+copy"
}

// ficlone is the FICLONE ioctl: the destination shares the source's blocks,
// copied on write (btrfs, XFS); other filesystems refuse it.
const ficlone = 0x40049409

// copyTree copies the regular files and folders under src to dst (which
// must not exist), keeping their permissions. Each file is a reflink where
// the filesystem offers one, else a full copy (copy_file_range, so the
// kernel moves the bytes). Hard links are never used: etcd writes its
// database and the last WAL segment in place, which would change the source.
// With sync, every file and folder is flushed to disk before it returns.
func copyTree(src, dst string, sync bool) (copyStats, error) {
	var st copyStats
	var reflinks, copies int
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return st, err
	}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, info.Mode().Perm())
		case info.Mode().IsRegular():
			cloned, err := copyFile(path, target, info.Mode().Perm(), sync)
			if err != nil {
				return err
			}
			if cloned {
				reflinks++
			} else {
				copies++
			}
			st.files++
			st.bytes += info.Size()
			return nil
		default:
			return fmt.Errorf("copy %s: not a regular file or folder", path)
		}
	})
	if err != nil {
		return st, err
	}
	if sync {
		err = filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			return syncDir(path)
		})
	}
	switch {
	case reflinks > 0 && copies > 0:
		st.method = "reflink+copy"
	case reflinks > 0:
		st.method = "reflink"
	default:
		st.method = "copy"
	}
	return st, err
}

// copyFile copies one file, by reflink when it can (cloned is then true).
func copyFile(src, dst string, perm os.FileMode, sync bool) (cloned bool, err error) {
	in, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, out.Fd(), ficlone, in.Fd())
	if errno == 0 {
		cloned = true
	} else if _, err := io.Copy(out, in); err != nil {
		return false, fmt.Errorf("copy %s: %w", src, err)
	}
	if sync {
		if err := out.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
			return cloned, fmt.Errorf("sync %s: %w", dst, err)
		}
	}
	return cloned, nil
}
