package executor

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// holderProgram is the whole of the holder container's image (see
// volume.go): a static Linux executable that blocks in the kernel until it is
// killed, and does nothing else. It is assembled here, from the few machine
// instructions below, because the executor must build the holder's image
// without a registry, a compiler or a host path, and a FROM scratch image has
// no sleep(1) to borrow.
//
// The file is one ELF64 header, one PT_LOAD program header mapping the whole
// file read+execute at 0x400000, and the code, which starts right after the
// headers. As PID 1 of its container the program has no signal handlers, so
// the kernel ignores every signal sent from inside the container; the daemon
// ends it with SIGKILL when the executor force-removes it.
func holderProgram(arch string) ([]byte, error) {
	switch arch {
	case "amd64", "x86_64":
		return holderELF(elf.EM_X86_64, []byte{
			0xb8, 0x22, 0x00, 0x00, 0x00, // mov  eax, 34   ; pause(2)
			0x0f, 0x05, //                   syscall
			0xeb, 0xf7, //                   jmp  -9        ; to the mov, should a signal wake it
		}), nil
	case "arm64", "aarch64":
		// arm64 has no pause(2); ppoll(NULL, 0, NULL, NULL) waits the same.
		var code []byte
		for _, insn := range []uint32{
			0xd2800928, // movz x8, #73    ; ppoll
			0xd2800000, // movz x0, #0     ; fds = NULL
			0xd2800001, // movz x1, #0     ; nfds = 0
			0xd2800002, // movz x2, #0     ; timeout = NULL: forever
			0xd2800003, // movz x3, #0     ; sigmask = NULL
			0xd4000001, // svc  #0
			0x17fffffa, // b    -6 insns   ; to the first movz
		} {
			code = binary.LittleEndian.AppendUint32(code, insn)
		}
		return holderELF(elf.EM_AARCH64, code), nil
	}
	return nil, fmt.Errorf("no volume holder for the engine's architecture %q (only amd64 and arm64)", arch)
}

func holderELF(machine elf.Machine, code []byte) []byte {
	const (
		base   = 0x400000
		ehsize = 64 // sizeof(Elf64_Ehdr)
		phsize = 56 // sizeof(Elf64_Phdr)
	)
	size := uint64(ehsize + phsize + len(code))
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Entry: base + ehsize + phsize, Phoff: ehsize,
		Ehsize: ehsize, Phentsize: phsize, Phnum: 1,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	p := elf.Prog64{
		Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X),
		Vaddr: base, Paddr: base, Filesz: size, Memsz: size,
		Align: 0x10000, // also right for arm64 kernels with 64 KiB pages
	}
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, &h)
	_ = binary.Write(&b, binary.LittleEndian, &p)
	b.Write(code)
	return b.Bytes()
}
